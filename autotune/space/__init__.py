"""Space: which launch configurations a study may try on this machine (a YAML file, its
expressions, and its resolution against a probed Topology). The built-in files live in builtin/."""
