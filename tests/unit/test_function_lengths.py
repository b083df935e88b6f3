"""No function in autotune/ is longer than a reader can hold at once (tests/function_lengths.py)."""
from __future__ import annotations

from function_lengths import function_lengths

MAX_LINES = 60


def test_no_function_in_autotune_is_over_60_lines():
    long = [f"{name} ({lines} lines)" for lines, name in function_lengths() if lines > MAX_LINES]
    assert not long, (f"{len(long)} function(s) over {MAX_LINES} lines; split them into named "
                      "steps:\n  " + "\n  ".join(long))


def test_lengths_count_from_def_to_last_line_nested_functions_included(tmp_path):
    pkg = tmp_path / "autotune"
    pkg.mkdir()
    (pkg / "m.py").write_text("def outer():\n    def inner():\n        pass\n    return 1\n\n\n"
                              "class K:\n    async def method(self):\n        return 2\n")
    assert function_lengths(pkg) == [(4, "autotune/m.py:1 outer"),
                                     (2, "autotune/m.py:2 outer.inner"),
                                     (2, "autotune/m.py:8 K.method")]
