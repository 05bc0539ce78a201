"""The symbolic sizes ``torch.export`` writes, as a grammar: what may reach ``sympy.sympify``.

ExecuTorch's export deserializer hands every SymInt/SymBool ``expr_str`` of an ETRecord to
``sympy.sympify``, which evaluates Python. An ``expr_str`` is ``str()`` of a sympy
expression over torch's size symbols, so this grammar admits only what that printer
writes for them, and nothing that Python could run as code:

======================  ===============================================================
token                   admitted
======================  ===============================================================
symbol                  lowercase letters then digits (``s27``, ``u0``, ``zuf3``), never
                        called
integer                 ASCII digits, at most ``MAX_LITERAL`` characters
decimal                 ``0.5``, ``1.00000000000000e-5`` (``TruncToInt(0.5*ToFloat(s27))``
                        from ``interpolate(scale_factor=)``)
operator                ``+ - * / // % & | ~ < <= > >= == !=`` and ``, ( )``
power                   ``base**k``: ``k`` an integer of at most 2 digits, the base a
                        symbol, call or parenthesis that holds a symbol and no power
                        (``16*s83**2``); so no exponent tower
function                a name in ``FUNCTIONS``, always followed by ``(``
constant                ``True``, ``False``
======================  ===============================================================

No quotes, dots outside a decimal, brackets, attribute access, keywords or non-ASCII
characters pass, the text is at most ``MAX_LENGTH`` characters and nests at most
``MAX_DEPTH`` deep. The tokens that do pass are sympy arithmetic and sympy or
``torch.utils._sympy.functions`` calls (sympify makes an unknown function name an
undefined ``Function``).

Example::

    >>> refusal("Max(1, (((s0 - 3)//2)) + 1)*s53") is None
    True
    >>> refusal("__import__('os').system('id') or 16*s27")
    "'__import__' is neither a size symbol nor a function torch.export writes"
"""

from __future__ import annotations

import re
from typing import Literal

MAX_LENGTH = 4096
"""Longest ``expr_str`` admitted (the longest in vkdiff's test programs is under 100)."""
MAX_DEPTH = 32
"""Deepest nesting of parentheses, calls and unary signs admitted."""
MAX_LITERAL = 40
"""Longest number literal admitted."""

FUNCTIONS = frozenset({
    # sympy's, as torch.export's shapes print them
    "Abs", "And", "Eq", "Ge", "Gt", "ITE", "Le", "Lt", "Max", "Min", "Mod", "Ne", "Not", "Or", "Piecewise",
    # torch.utils._sympy.functions
    "BitwiseFn_bitwise_and", "BitwiseFn_bitwise_or", "BitwiseFn_bitwise_xor", "CeilDiv", "CeilToInt", "CleanDiv",
    "FloatPow", "FloatTrueDiv", "FloorDiv", "FloorToInt", "Identity", "IntTrueDiv", "IsNonOverlappingAndDenseIndicator",
    "LShift", "ModularIndexing", "PowByNatural", "PythonMod", "RShift", "RoundDecimal", "RoundToInt", "ToFloat",
    "TruncToFloat", "TruncToInt", "Where",
    "OpaqueUnaryFn_acos", "OpaqueUnaryFn_asin", "OpaqueUnaryFn_asinh", "OpaqueUnaryFn_atan", "OpaqueUnaryFn_cos",
    "OpaqueUnaryFn_cosh", "OpaqueUnaryFn_exp", "OpaqueUnaryFn_log", "OpaqueUnaryFn_log2", "OpaqueUnaryFn_sin",
    "OpaqueUnaryFn_sinh", "OpaqueUnaryFn_sqrt", "OpaqueUnaryFn_tan", "OpaqueUnaryFn_tanh",
})
"""Function names ``str()`` prints for the symbolic functions torch.export uses."""
CONSTANTS = frozenset({"True", "False"})
BINARY = frozenset({"+", "-", "*", "/", "//", "%", "&", "|", "<", "<=", ">", ">=", "==", "!="})
UNARY = frozenset({"-", "+", "~"})

Kind = Literal["symbol", "number", "name", "op", "space"]
_TOKEN = re.compile(r"""
    (?P<space>\ +)
  | (?P<number>[0-9]+(?:\.[0-9]+(?:e[+-]?[0-9]{1,3})?)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|//|<=|>=|==|!=|[-+*/%&|~<>(),])
""", re.VERBOSE | re.ASCII)
_SYMBOL = re.compile(r"[a-z]+[0-9]+", re.ASCII)


class Refused(ValueError):
    """Text outside the grammar (the message says where)."""


def refusal(text: object) -> str | None:
    """Why ``text`` is not an expression torch.export writes, or None when it is one.

    Args:
        text (object): an ``expr_str`` as read from a file (anything but a ``str`` is refused).

    Returns:
        None, or the reason in a few words.
    """
    if not isinstance(text, str):
        return f"not a string but {type(text).__name__}"
    if len(text) > MAX_LENGTH:
        return f"{len(text)} characters, over {MAX_LENGTH}"
    try:
        _Parser(_tokens(text)).expression_only()
    except Refused as exc:
        return str(exc)
    return None


def _tokens(text: str) -> list[tuple[Kind, str]]:
    """``text`` as (kind, token) pairs without spaces; a character no token starts with is refused."""
    out: list[tuple[Kind, str]] = []
    at = 0
    while at < len(text):
        found = _TOKEN.match(text, at)
        if found is None:
            raise Refused(f"{text[at]!r} is not part of an expression torch.export writes")
        kind = found.lastgroup
        token = found.group()
        at = found.end()
        if kind == "space":
            continue
        if kind == "number" and len(token) > MAX_LITERAL:
            raise Refused(f"a number of {len(token)} characters, over {MAX_LITERAL}")
        if kind == "name" and token not in FUNCTIONS and token not in CONSTANTS and not _SYMBOL.fullmatch(token):
            raise Refused(f"{token[:40]!r} is neither a size symbol nor a function torch.export writes")
        out.append((kind, token))  # type: ignore[arg-type]
    return out


class _Parser:
    """Recursive descent over the tokens; each method returns whether its phrase holds a symbol and a power."""

    def __init__(self, tokens: list[tuple[Kind, str]]) -> None:
        self.tokens = tokens
        self.at = 0
        self.depth = 0

    def expression_only(self) -> None:
        """The whole text is one expression."""
        if not self.tokens:
            raise Refused("empty")
        self.expression()
        if self.at < len(self.tokens):
            raise Refused(f"unexpected {self.tokens[self.at][1]!r}")

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def take(self) -> tuple[Kind, str]:
        if self.at >= len(self.tokens):
            raise Refused("ends early")
        self.at += 1
        return self.tokens[self.at - 1]

    def expect(self, token: str) -> None:
        if self.peek() != token:
            raise Refused(f"expected {token!r}, found {self.peek()!r}")
        self.at += 1

    def deeper(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Refused(f"nested deeper than {MAX_DEPTH}")

    def expression(self) -> tuple[bool, bool]:
        """unary (binary-operator unary)*"""
        symbol, power = self.unary()
        while self.peek() in BINARY:
            self.at += 1
            more = self.unary()
            symbol, power = symbol or more[0], power or more[1]
        return symbol, power

    def unary(self) -> tuple[bool, bool]:
        """unary-operator unary | power"""
        if self.peek() in UNARY:
            self.at += 1
            self.deeper()
            found = self.unary()
            self.depth -= 1
            return found
        return self.power()

    def power(self) -> tuple[bool, bool]:
        """primary ['**' integer], the primary holding a symbol and no power (no constant to raise, no tower)."""
        symbol, power = self.primary()
        if self.peek() != "**":
            return symbol, power
        self.at += 1
        kind, exponent = self.take()
        if kind != "number" or not exponent.isdigit() or len(exponent) > 2:
            raise Refused(f"exponent {exponent!r}: only an integer of at most 2 digits")
        if not symbol or power:
            raise Refused("a power of a constant or of a power")
        return True, True

    def primary(self) -> tuple[bool, bool]:
        """number | symbol | constant | function '(' arguments ')' | '(' arguments ')'"""
        kind, token = self.take()
        if kind == "number" or token in CONSTANTS:
            return False, False
        if kind == "name" and token not in FUNCTIONS:
            if self.peek() == "(":
                raise Refused(f"{token!r} is called")
            return True, False
        if kind == "name":
            self.expect("(")
            return self.arguments()
        if token == "(":
            return self.arguments()
        raise Refused(f"unexpected {token!r}")

    def arguments(self) -> tuple[bool, bool]:
        """expression (',' expression)* [','] ')' — a call's arguments or a parenthesis (a tuple in Piecewise)."""
        self.deeper()
        symbol = power = False
        while True:
            more = self.expression()
            symbol, power = symbol or more[0], power or more[1]
            if self.peek() == ",":
                self.at += 1
                if self.peek() == ")":
                    break
                continue
            break
        self.expect(")")
        self.depth -= 1
        return symbol, power
