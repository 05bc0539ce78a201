"""Text from files on the terminal: control characters shown, never obeyed; messages kept to one line.

Case ids, method and op names, reasons and exception texts can come from a crafted
``.pte``, artifact or results file. An escape sequence in one would move the cursor,
rewrite earlier lines or retitle the terminal; a bidirectional override would reorder
what the reader sees. Every such character is written as its escape instead.
"""

from __future__ import annotations

import re

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with control characters (but newline and tab) and bidi overrides as escapes.

    Example::

        >>> printable("ok\\x1b[2J\\u202e")
        'ok\\\\x1b[2J\\\\u202e'
    """
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def one_line(text: object, limit: int = 200) -> str:
    """``text`` printable, on one line (line breaks as `` | ``), cut to ``limit`` characters.

    Example::

        >>> one_line("first\\nsecond", 12)
        'first | sec…'
    """
    flat = " | ".join(part.strip() for part in printable(str(text)).splitlines() if part.strip())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"
