"""`tidelog demo-segment DIR`: write a small Kafka-format segment to try `dump-log` on."""

from __future__ import annotations

import argparse
from pathlib import Path

from tidelog.cli.dump_log import write_demo_segment


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo-segment", help="write a small demo segment (all five codecs)")
    p.add_argument("directory", nargs="?", default="demo-data/demo-0")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(write_demo_segment(Path(args.directory)))
    return 0
