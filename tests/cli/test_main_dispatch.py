"""``tidelog COMMAND`` imports only COMMAND's module: for every command the full parser
knows, a parser built for that command alone (in a fresh interpreter) has it and no other,
with the same options, and the command modules it loaded are those that module imports
itself (demo-segment shares dump-log's writer), never the whole package."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from tidelog.cli.main import build_parser


def _commands() -> dict[str, list[str]]:
    """Every command of the full parser and its option strings."""
    parser = build_parser(["-h"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sorted(o for a in p._actions for o in a.option_strings)
            for name, p in sub.choices.items()}  # fmt: skip


def test_each_command_alone_loads_only_its_module() -> None:
    commands = _commands()
    assert {"serve", "topics", "produce", "consume", "groups", "perf", "dump-log"} <= set(commands)
    code = (
        "import argparse, json, sys\n"
        "from tidelog.cli.main import build_parser\n"
        "out = {}\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    before = {m for m in sys.modules if m.startswith('tidelog.cli.')}\n"
        "    p = build_parser([name, '-x'])\n"
        "    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))\n"
        "    loaded = {m for m in sys.modules if m.startswith('tidelog.cli.')} - before\n"
        "    opts = sorted(o for a in sub.choices[name]._actions for o in a.option_strings)\n"
        "    commands = sorted(m for m in loaded if hasattr(sys.modules[m], 'register'))\n"
        "    out[name] = [sorted(sub.choices), opts, commands]\n"
        "    for m in loaded: del sys.modules[m]\n"
        "print(json.dumps(out))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, json.dumps(sorted(commands))],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    for name, (choices, opts, loaded) in json.loads(out).items():
        assert choices == [name], (name, choices)
        assert opts == commands[name], name
        assert 1 <= len(loaded) <= 2 < len(commands), (name, loaded)


def test_a_helper_module_name_is_no_command() -> None:
    """``tidelog share-groups`` names a module that registers no command (share groups are
    ``groups --type share``): argparse lists the commands there are, not an empty list."""
    r = subprocess.run([sys.executable, "-m", "tidelog.cli.main", "share-groups", "--list"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "invalid choice: 'share-groups' (choose from " in r.stderr
    assert "'groups'" in r.stderr and "'topics'" in r.stderr, r.stderr


def test_an_option_value_before_the_command_is_no_command() -> None:
    """``tidelog --log-level DEBUG serve`` loads serve's module alone, as ``tidelog serve``."""
    code = (
        "import sys\n"
        "from tidelog.cli.main import build_parser\n"
        "build_parser(['--log-level', 'DEBUG', 'serve', '--port', '0'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('tidelog.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert out.strip() == "['tidelog.cli.main', 'tidelog.cli.serve']", out
