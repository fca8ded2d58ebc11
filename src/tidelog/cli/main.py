"""`tidelog` command line. Each module in this package that defines ``register(subparsers)``
adds one subcommand, so commands live in their own files (serve.py, dump_log.py, ...).

Every failure a command does not handle itself ends as one line on stderr naming what failed
(``tidelog produce: KafkaException: ...``) and a non-zero exit; ``--debug`` shows the
traceback instead."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

import tidelog.cli as cli_pkg

# Commands whose module name differs from the command: importing only the chosen command's
# module keeps each command's start-up free of the other commands' imports (a short
# `tidelog perf produce` run is mostly start-up).
_MODULE_OF = {"dump-log": "dump_log", "demo-segment": "demo"}
# options of ``tidelog`` itself that take a value
_VALUED_OPTIONS = frozenset({"--log-level"})


def _command_modules(argv: list[str] | None) -> list[str]:
    names = sorted(
        name[:-3]
        for d in cli_pkg.__path__
        for name in os.listdir(d)
        if name.endswith(".py") and name not in ("__init__.py", "main.py")
    )
    args = sys.argv[1:] if argv is None else argv
    # the words, skipping the value of an option before the command (--log-level DEBUG)
    words = [a for i, a in enumerate(args)
             if not a.startswith("-") and (i == 0 or args[i - 1] not in _VALUED_OPTIONS)]
    if words:
        wanted = _MODULE_OF.get(words[0], words[0].replace("-", "_"))
        if wanted in names and "-h" not in args[: args.index(words[0])]:
            return [wanted]
    return names


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tidelog")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, reading the installed version only when asked:
    importlib.metadata costs ~20 ms of every command's start-up otherwise."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"tidelog {_version()}")
        parser.exit()


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tidelog", description="A Kafka-compatible log broker.")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    parser.add_argument("--version", action=_VersionAction, help="show the version and exit")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    modules = _command_modules(argv)
    _register(sub, modules)
    if not sub.choices and len(modules) == 1:
        # a helper module's name (share-groups: `groups --type share`) is no command: the
        # full list, so argparse names the commands there are
        _register(sub, _command_modules([]))
    return parser


def _register(sub: Any, modules: list[str]) -> None:
    for name in modules:
        module = importlib.import_module(f"tidelog.cli.{name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)


def restore_ctrl_c() -> None:
    """Give SIGINT its default handler (KeyboardInterrupt) when it was inherited ignored.

    A shell without job control (a script, ``cmd &`` in ``sh -c``, CI) starts a background job
    with SIGINT ignored, and Python keeps an ignored SIGINT ignored: Ctrl-C or ``kill -INT``
    would then do nothing to ``tidelog produce`` (which flushes and exits 130) or to
    ``tidelog serve`` while it starts. Every command here treats SIGINT as the user asking it to
    stop, so it means the same whichever way the command was started."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread (main() called in-process)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _configure_logging(level: str) -> None:
    """Imported here: a command that logs nothing (``set_defaults(uses_logging=False)``, as
    ``perf produce``, whose short runs are mostly start-up) is spared ~5 ms of imports."""
    import logging

    chosen = getattr(logging, level.upper(), logging.INFO)
    logging.basicConfig(level=chosen, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # the registry client's HTTP library logs every request at INFO ("HTTP Request: GET ...
    # 200 OK"): a line per produce/consume with --value-format; shown with --log-level DEBUG
    for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
        logging.getLogger(name).setLevel(chosen if chosen <= logging.DEBUG else logging.WARNING)


def _one_line(exc: Exception, args: argparse.Namespace) -> str:
    """What failed, in one line: a CliError's own message; no connection to any bootstrap
    server (tidelog's own protocol client, used where librdkafka has no call) as the
    librdkafka commands say it; librdkafka's error as its text and name (not confluent-kafka's
    ``KafkaError{code=...,val=...,str=...}``); else the exception's type and text."""
    from tidelog.cli.client_config import CliError
    from tidelog.client.conn import KafkaConnectionError

    if isinstance(exc, CliError):
        return str(exc)
    if isinstance(exc, KafkaConnectionError) and hasattr(args, "bootstrap_server"):
        cause = exc.context.removeprefix("no bootstrap server reachable: ")
        return f"cannot reach the bootstrap servers {args.bootstrap_server}: {cause}"
    if type(exc).__name__ == "KafkaException" and exc.args and _is_kafka_error(exc.args[0]):
        return _kafka_error_line(exc.args[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _is_kafka_error(err: object) -> bool:
    return callable(getattr(err, "str", None)) and callable(getattr(err, "name", None))


def _kafka_error_line(err: Any) -> str:
    """librdkafka's error: its text and Kafka's name for it (a fatal error says so)."""
    return f"{err.str()} ({err.name()})"


def main(argv: list[str] | None = None) -> int:
    restore_ctrl_c()
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "uses_logging", True):
        _configure_logging(str(args.log_level))
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if args.debug:
            raise
        print(f"tidelog {args.command}: {_one_line(exc, args)}", file=sys.stderr)
        return 1
    except:  # noqa: E722 - confluent-kafka can raise its KafkaError itself, no Exception
        err = sys.exc_info()[1]
        if args.debug or isinstance(err, BaseException) or not _is_kafka_error(err):
            raise
        print(f"tidelog {args.command}: {_kafka_error_line(err)}", file=sys.stderr)
        return 1
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
