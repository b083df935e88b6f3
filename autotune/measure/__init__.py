"""Measure: statistics over what ranks measured (pure), what a script reported or printed, what a
rank really ran with (seen from outside), and the quality arithmetic."""
