"""Properties files read as java.util.Properties.load(InputStream) reads them (the cases of
its Javadoc), which is how Kafka reads server.properties and client.properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidelog.config import ConfigError, load_properties, read_properties_file


def test_latin1_comment_and_value(tmp_path: Path) -> None:
    f = tmp_path / "server.properties"
    f.write_bytes("# caf\u00e9\nname=caf\u00e9\n".encode("iso-8859-1"))
    assert read_properties_file(f) == {"name": "caf\u00e9"}
    # UTF-8 bytes are read as Latin-1 characters, as Java does, rather than failing
    f.write_bytes("# caf\u00e9\nname=\u00e9\n".encode())
    assert read_properties_file(f) == {"name": "\u00c3\u00a9"}


def test_separators_and_blanks() -> None:
    text = "a=1\nb : 2\nc 3\n  d=\t4  \ne\n! bang comment\n# hash comment\n\nf==5\n"
    assert load_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4  ",  # trailing blanks belong to the value in Java
        "e": "",
        "f": "=5",
    }


def test_continuation_lines() -> None:
    text = "fruits  apple, banana, \\\n        pear, \\\n        cantaloupe\nnext=1\n"
    assert load_properties(text) == {"fruits": "apple, banana, pear, cantaloupe", "next": "1"}
    # an even number of backslashes is an escaped backslash, not a continuation
    assert load_properties("p=c:\\\\\nq=2\n") == {"p": "c:\\", "q": "2"}
    # a comment line never continues
    assert load_properties("# note \\\nr=3\n") == {"r": "3"}


def test_escapes() -> None:
    text = "key\\ with\\ blanks=v\ncolon\\:key=x\ntab=a\\tb\nuni=\\u00e9\\u4e2d\nother=\\q\n"
    assert load_properties(text) == {
        "key with blanks": "v",
        "colon:key": "x",
        "tab": "a\tb",
        "uni": "\u00e9\u4e2d",
        "other": "q",
    }
    with pytest.raises(ConfigError, match="Malformed"):
        load_properties("bad=\\u12\n")


def test_line_terminators_and_last_key_wins() -> None:
    assert load_properties("a=1\r\nb=2\rc=3\na=4") == {"a": "4", "b": "2", "c": "3"}
