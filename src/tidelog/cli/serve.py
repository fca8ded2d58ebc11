"""``tidelog serve``: run a broker (``-c server.properties``, ``--override k=v``, ``--port``).

The properties file is read as Java reads it (ISO-8859-1, escapes, continuation lines), and
keys no broker setting knows are named in one warning at start-up, as Kafka's
AbstractConfig.logUnused does."""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tidelog.config.core import ConfigError
from tidelog.config.fault_config import FAULT_PLAN_FILE
from tidelog.config.properties import read_properties_file
from tidelog.iceberg import start_iceberg
from tidelog.schema_registry import start_schema_registry
from tidelog.server.allocator import tune_allocator
from tidelog.server.gil import tune_switch_interval
from tidelog.server.heap import HeapFreezer
from tidelog.server.sched_slice import tune_loop_slice
from tidelog.server.slice_governor import SliceGovernor, loop_slice_governor
from tidelog.util.clock import SYSTEM_CLOCK

if TYPE_CHECKING:
    from tidelog.http.server import HttpListener
    from tidelog.iceberg.service import IcebergService
    from tidelog.schema_registry.listener import SchemaRegistryListener
    from tidelog.server.broker import Broker
    from tidelog.server.faults import FaultPlan

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
    p.add_argument(
        "--port",
        type=int,
        help="listen on this port (replaces the port of the first listener in listeners)",
    )
    p.add_argument("--ready-file", type=Path, help="write 'host:port' here once listening")
    p.set_defaults(func=run)


def build_props(
    config_file: Path | None, overrides: list[str], port: int | None = None
) -> dict[str, str]:
    props: dict[str, str] = {}
    if config_file is not None:
        props.update(read_properties_file(config_file))
    for item in overrides:
        if "=" not in item:
            raise ConfigError("--override", item, "expected KEY=VALUE")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    if port is not None:
        if not 0 <= port <= 65535:
            raise ConfigError("--port", port, "expected a port number in [0, 65535]")
        first, *rest = props.get("listeners", "PLAINTEXT://localhost:9092").split(",")
        props["listeners"] = ",".join([f"{first.strip().rsplit(':', 1)[0]}:{port}", *rest])
    return props


# Keys a component reads from the raw properties rather than through a ConfigDef.
READ_WITHOUT_CONFIG_DEF = frozenset({"sasl.jaas.config"})
# The modules whose ConfigDefs declare the broker's keys (small: the settings, not the parts).
_CONFIG_DEF_MODULES = (
    "tidelog.config.broker_config", "tidelog.config.log_config",
    "tidelog.config.remote_log_config", "tidelog.config.iceberg_config",
    "tidelog.config.fault_config", "tidelog.storage.manager_config",
    "tidelog.storage.cleaner.config", "tidelog.server.coordinator.group.config",
    "tidelog.server.coordinator.transaction.config",
)


def unknown_broker_keys(props: dict[str, str]) -> list[str]:
    """Keys no component's ConfigDef declares: group, transaction, cleaner, log manager,
    tiered storage, Iceberg and fault plan settings live in their own tables, each imported
    here (a subsystem the broker starts only when enabled may not be imported otherwise)."""
    for module in _CONFIG_DEF_MODULES:
        importlib.import_module(module)
    from tidelog.config.core import known_config_names
    from tidelog.config.log_config import BROKER_SYNONYMS

    known = known_config_names() | {syn for syns in BROKER_SYNONYMS.values() for syn, _ in syns}
    known |= READ_WITHOUT_CONFIG_DEF
    # listener.name.<listener>.<key>: Kafka's per-listener override of a known key; the
    # remote storage and metadata managers' own settings under their prefixes
    prefixes = ("listener.name.", props.get("remote.log.storage.manager.impl.prefix",
                                            "rsm.config."),
                props.get("remote.log.metadata.manager.impl.prefix", "rlmm.config."))
    return sorted(k for k in props if k not in known and not k.startswith(prefixes))


async def _serve(props: dict[str, str], ready_file: Path | None,
                 governor: SliceGovernor | None = None) -> None:
    from tidelog import _native
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.server.broker import Broker

    # Handlers go in first: a signal that arrives while the broker starts (or right after the
    # ready file appears) must still mean a clean shutdown, not a KeyboardInterrupt.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    plan = _fault_plan() if props.get(FAULT_PLAN_FILE) else None  # testing only
    broker = Broker(BrokerConfig(props), clock=plan.clock if plan else SYSTEM_CLOCK)
    if plan is not None:
        from tidelog.server.faults import install

        install(broker, plan)  # before the listeners open: every connection sees the plan
    _warn_unknown_keys(props)
    await broker.start()
    services = _Services()
    try:
        await services.start(broker)
    except BaseException:
        await services.stop()
        await broker.stop()
        raise
    log.info("per-record core: %s", _native.core_description)
    # what start-up made (modules, configs, the loaded logs) is never garbage: out of the
    # collector's way, so a full collection scans only what serving made since. Frozen
    # without a collection first: that found a handful of objects and cost 10-20 ms of CPU
    # on the loop before the first request was answered.
    gc.freeze()
    rm = broker.replica_manager  # and so are the partitions hosted later (server/heap.py)
    freezer = HeapFreezer(lambda: (rm.partitions_made, rm.partitions_dropped))
    freezer.start()
    if governor is not None:  # the loop's short slice, while the loop mostly sleeps
        governor.start(loop)
    following = _follow_fault_plan(broker, plan, props) if plan is not None else None
    if ready_file is not None:
        _write_ready_file(ready_file, f"{broker.advertised_host}:{broker.bound_port}\n")
    broker.fatal_listeners.append(stop.set)  # all log dirs failed: shut down cleanly
    await stop.wait()
    log.info("shutting down")
    freezer.stop()
    if governor is not None:
        governor.stop()
    if following is not None:
        following.cancel()
    await services.stop()
    await broker.stop()
    if broker.fatal_error is not None:
        raise RuntimeError(broker.fatal_error)  # exit non-zero, as Kafka does


def _warn_unknown_keys(props: dict[str, str]) -> None:
    unknown = unknown_broker_keys(props)
    if unknown:  # once, in the words of Kafka's AbstractConfig.logUnused
        log.warning(
            "These configurations '[%s]' were supplied but are not used yet.", ", ".join(unknown)
        )


def _write_ready_file(ready_file: Path, text: str) -> None:
    """Written aside and renamed: a reader sees the whole address or no file."""
    tmp = ready_file.with_name(ready_file.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(ready_file)


class _Services:
    """What runs beside the broker, each off unless configured: the HTTP listener (/metrics,
    health, console), the Schema Registry, Iceberg translation. Stopped in reverse order."""

    def __init__(self) -> None:
        self.http: HttpListener | None = None
        self.registry: SchemaRegistryListener | None = None
        self.iceberg: IcebergService | None = None

    async def start(self, broker: Broker) -> None:
        if broker.config.values["http.listeners"]:
            from tidelog.http import start_http_listener

            self.http = await start_http_listener(broker)
        self.registry = await start_schema_registry(broker)
        self.iceberg = await start_iceberg(broker, self.registry)
        if self.http is not None and self.iceberg is not None:  # translation lag on /metrics
            self.http.registry.register(self.iceberg.collector())
            self.http.topic_tables = self.iceberg.table_view  # the topic page shows the table

    async def stop(self) -> None:
        if self.iceberg is not None:
            await self.iceberg.stop()
        if self.registry is not None:
            await self.registry.stop()
        if self.http is not None:
            await self.http.stop()


def _fault_plan() -> FaultPlan:
    """Imported only with tidelog.fault.plan.file set: a broker that follows no fault plan
    starts without the fault machinery."""
    from tidelog.server.faults import FaultPlan

    return FaultPlan()


def _follow_fault_plan(broker: Broker, plan: FaultPlan, props: dict[str, str]) -> asyncio.Task[None]:
    """tidelog.fault.plan.file: the broker injects the faults a test writes there."""
    from tidelog.server.fault_file import PlanFollower, follow, plan_path

    path = plan_path(props[FAULT_PLAN_FILE], broker.config.node_id)
    log.warning("Following the fault plan %s: this broker injects faults (testing only)", path)
    return asyncio.get_running_loop().create_task(follow(PlanFollower(plan, path)))


def _source(args: argparse.Namespace, key: str) -> str:
    """Where a bad setting came from, so the message points at the line to fix."""
    if key == "listeners" and args.port is not None:
        return "--port"
    if any(item.split("=", 1)[0].strip() == key for item in args.override):
        return "--override"
    return str(args.config) if args.config else "config"


def run(args: argparse.Namespace) -> int:
    try:
        props = build_props(args.config, args.override, args.port)
    except OSError as exc:
        log.error("cannot read %s: %s", exc.filename or args.config, exc.strerror or exc)
        return 2
    except ConfigError as exc:
        log.error("%s: %s", args.config or "--override", exc)
        return 2
    allocator = tune_allocator()  # the process is ours: see tidelog.server.allocator
    log.info("allocator: %s", allocator)
    log.info("GIL switch interval: %s", tune_switch_interval())  # see tidelog.server.gil
    try:  # this thread runs the event loop below (see tidelog.server.sched_slice)
        log.info("event loop thread's scheduler slice: %s", tune_loop_slice())
        governor = loop_slice_governor()
        if governor is not None:
            log.info("the kernel's slice again while the loop is over %.0f%% busy",
                     governor.max_busy * 100)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(_serve(props, args.ready_file, governor))
    except ConfigError as exc:
        log.error("%s: %s", _source(args, exc.name), exc)
        return 2
    except Exception as exc:  # a storage/metadata error at start-up: say why, exit non-zero
        log.error("broker failed: %s", exc)
        return 1
    except (SystemExit, asyncio.CancelledError) as exc:
        # sys.exit in a loop callback, a cancellation escaping the serving task: still say why
        log.error("broker failed: %s %s", type(exc).__name__, exc)
        return 1
    return 0
