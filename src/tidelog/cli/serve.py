"""``tidelog serve``: run a broker (``-c server.properties``, ``--override k=v``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from pathlib import Path
from typing import Any

from tidelog.config.core import ConfigError, load_properties

log = logging.getLogger("tidelog.serve")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("serve", help="run a Kafka-compatible broker")
    p.add_argument("-c", "--config", type=Path, help="server.properties file")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (repeatable)",
    )
    p.add_argument("--ready-file", type=Path, help="write 'host:port' here once listening")
    p.set_defaults(func=run)


def build_props(config_file: Path | None, overrides: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    if config_file is not None:
        props.update(load_properties(config_file.read_text()))
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--override", item, "expected KEY=VALUE")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return props


async def _serve(props: dict[str, str], ready_file: Path | None) -> None:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog import _native
    from tidelog.server.broker import Broker

    # Handlers go in first: a signal that arrives while the broker starts (or right after the
    # ready file appears) must still mean a clean shutdown, not a KeyboardInterrupt.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    broker = Broker(BrokerConfig(props))
    await broker.start()
    log.info("per-record core: %s", _native.core_description)
    if ready_file is not None:
        tmp = ready_file.with_name(ready_file.name + ".tmp")
        tmp.write_text(f"{broker.advertised_host}:{broker.bound_port}\n")
        tmp.replace(ready_file)
    broker.fatal_listeners.append(stop.set)  # all log dirs failed: shut down cleanly
    await stop.wait()
    log.info("shutting down")
    await broker.stop()
    if broker.fatal_error is not None:
        raise RuntimeError(broker.fatal_error)  # exit non-zero, as Kafka does


def run(args: argparse.Namespace) -> int:
    try:
        props = build_props(args.config, args.override)
    except (OSError, ConfigError) as exc:
        log.error("%s", exc)
        return 2
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(_serve(props, args.ready_file))
    except ConfigError as exc:
        log.error("%s", exc)
        return 2
    except Exception as exc:  # a storage/metadata error at start-up: say why, exit non-zero
        log.error("broker failed: %s", exc)
        return 1
    return 0
