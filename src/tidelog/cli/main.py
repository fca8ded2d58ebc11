"""`tidelog` command line. Each module in this package that defines ``register(subparsers)``
adds one subcommand, so commands live in their own files (serve.py, dump_log.py, ...)."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys

import tidelog.cli as cli_pkg


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidelog", description="A Kafka-compatible log broker.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in sorted(pkgutil.iter_modules(cli_pkg.__path__), key=lambda m: m.name):
        if mod.name == "main":
            continue
        module = importlib.import_module(f"tidelog.cli.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
