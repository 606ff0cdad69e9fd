"""Java ``.properties`` files as Kafka reads server.properties: ``read_properties`` and
``parse_properties`` (Properties.load's comments, separators, line continuations and escapes)."""

from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_NEWLINE = re.compile(r"\r\n|\r|\n")
_BLANK = " \t\f"


def read_properties(path: str) -> dict[str, str]:
    """Read a .properties file (UTF-8; Java reads ISO-8859-1, identical for ASCII files)."""
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def parse_properties(text: str) -> dict[str, str]:
    """Java Properties.load rules: #/! comments, key=value, key: value or key value, a trailing
    odd backslash continues the line (leading blanks of the next line dropped), backslash
    escapes; values are trimmed as Kafka trims them. A later duplicate key wins."""
    props: dict[str, str] = {}
    lines = _NEWLINE.split(text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i < len(lines):
                line += lines[i].lstrip(_BLANK)
                i += 1
        key, value = _split_property(line)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    end = 0
    while end < len(line) and line[end] not in "=:" + _BLANK:
        end += 2 if line[end] == "\\" else 1
    end = min(end, len(line))
    rest = line[end:].lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    return _unescape(line[:end]), _unescape(rest).strip()


def _unescape(text: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)

    return _ESCAPE.sub(replace, text)
