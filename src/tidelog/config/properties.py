"""Java ``.properties`` files read as ``java.util.Properties.load(InputStream)`` reads them,
which is how Kafka loads ``server.properties`` and ``client.properties`` (Utils.loadProps):

* bytes are ISO-8859-1 (every byte is a character; a UTF-8 ``é`` comes through as two
  characters in a comment or value rather than failing), non-Latin-1 characters as ``\\uXXXX``;
* ``#`` or ``!`` as the first non-blank character starts a comment line;
* a line ending in an odd number of backslashes continues on the next line, whose leading
  blanks are dropped;
* the key ends at the first unescaped ``=``, ``:`` or blank; blanks around the separator are
  skipped, and a line with a key alone has the empty value;
* ``\\t \\n \\r \\f \\uXXXX`` escapes, and ``\\`` before any other character is that character.
"""

from __future__ import annotations

from pathlib import Path

from .core import ConfigError

_BLANK = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) with continuations joined, comments and blanks gone."""
    out: list[tuple[int, str]] = []
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        lineno, line = i + 1, natural[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(natural):
            line = line[:-1] + natural[i].lstrip(_BLANK)
            i += 1
        if _continues(line):  # a trailing backslash at end of file is dropped, as in Java
            line = line[:-1]
        out.append((lineno, line))
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _unescape(raw: str, lineno: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        i += 1
        if c != "\\" or i == len(raw):
            out.append(c)
            continue
        c = raw[i]
        i += 1
        if c == "u":
            digits = raw[i : i + 4]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigError(f"line {lineno}", raw, "Malformed \\uxxxx encoding")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_ESCAPES.get(c, c))
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of one logical line."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _BLANK:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_BLANK)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_BLANK)
    return key, rest


def load_properties(text: str) -> dict[str, str]:
    """Key/value pairs of a properties file's text (a later key replaces an earlier one)."""
    props: dict[str, str] = {}
    for lineno, line in _logical_lines(text):
        key, value = _split(line)
        props[_unescape(key, lineno)] = _unescape(value, lineno)
    return props


def read_properties_file(path: str | Path) -> dict[str, str]:
    """A properties file from disk, decoded as ISO-8859-1 as Java's Properties.load does."""
    return load_properties(Path(path).read_bytes().decode("iso-8859-1"))
