"""Text from a study, made safe to show: the one cleaning of control characters (ground floor).

A study is data that other people may have written (a shared PostgreSQL study, a results folder
copied from a colleague). Its strings reach three places where a control character is an attack:
a `# ...` comment line of an exported script (a newline ends the comment, and the rest of the line
runs), a terminal (an escape sequence rewrites the screen, the title, the clipboard), and an
environment. Every such string goes through `one_line` on its way out, and every block of text a
command prints through `printable`.
"""
from __future__ import annotations

import unicodedata

# Unicode's own line and paragraph separators end a line in some terminals and editors too.
_BREAKS = ("Zl", "Zp")


def one_line(text: object, *, keep_newlines: bool = False) -> str:
    """`text` with every control or format character (C0, DEL, C1, bidi overrides, line
    separators; newlines too unless `keep_newlines`) written as a visible escape such as `\\x1b`
    or `\\n`: shown, never acted on. `keep_newlines` is for a block whose lines we built
    ourselves (each field of which went through one_line first)."""
    out = []
    for ch in str(text):
        if keep_newlines and ch == "\n":
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat[0] != "C" and cat not in _BREAKS:
            out.append(ch)
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        else:
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return "".join(out)


def printable(text: object) -> str:
    """A block of lines for a terminal: newlines kept, every other control character escaped."""
    return one_line(text, keep_newlines=True)
