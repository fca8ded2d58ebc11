"""`tidelog configs`: Kafka's kafka-configs.sh for client quotas and broker configs.

    tidelog configs --bootstrap-server H:P --entity-type clients --entity-name app \\
        --alter --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    tidelog configs --entity-type users --entity-name alice --entity-type clients \\
        --entity-default --describe
    tidelog configs --entity-type brokers --entity-name 1 --alter --add-config \\
        message.max.bytes=2000000
    tidelog configs --entity-type brokers --entity-default --alter --delete-config log.retention.ms
    tidelog configs --entity-type client-metrics --entity-name producers --alter \\
        --add-config 'metrics=[org.apache.kafka.producer.],interval.ms=1000'

Quotas (users / clients) go through AlterClientQuotas / DescribeClientQuotas, which
confluent-kafka does not offer, on tidelog's own protocol client; broker configs through
confluent-kafka's AdminClient (IncrementalAlterConfigs / DescribeConfigs). As in
kafka-configs.sh, each --entity-type is followed by its --entity-name or --entity-default.
"""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    check_answer,
    client_config,
    make_client,
    protocol_client,
    wait,
)
from tidelog.cli.client_metrics_configs import run_client_metrics

TIMEOUT_S = 30

_TYPES = {"users": "user", "clients": "client-id", "ips": "ip", "brokers": "brokers",
          "client-metrics": "client-metrics"}


class _EntityAction(argparse.Action):
    """Pairs each --entity-type with the --entity-name / --entity-default after it."""

    def __call__(self, parser: Any, ns: Any, values: Any, option: Any = None) -> None:
        entities = list(getattr(ns, "entities", None) or [])
        if self.dest == "entity_type":
            entities.append([values, None, False])
        else:
            if not entities or entities[-1][1] is not None or entities[-1][2]:
                raise argparse.ArgumentError(self, "give --entity-type before its name")
            if self.dest == "entity_default":
                entities[-1][2] = True
            else:
                entities[-1][1] = values
        ns.entities = entities


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("configs", help="alter or describe client quotas and broker "
                                              "configs (kafka-configs)")
    add_connection_args(p)
    p.add_argument("--entity-type", dest="entity_type", action=_EntityAction,
                   choices=sorted(_TYPES), required=True)
    p.add_argument("--entity-name", dest="entity_name", action=_EntityAction)
    p.add_argument("--entity-default", dest="entity_default", action=_EntityAction, nargs=0)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--alter", action="store_true")
    g.add_argument("--describe", action="store_true")
    p.add_argument("--add-config", default="", metavar="K=V,K=V")
    p.add_argument("--delete-config", default="", metavar="K,K")
    p.set_defaults(func=run, entities=[])


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--add-config wants key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    deletes = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if any(t == "client-metrics" for t, _, _ in args.entities):  # KIP-714 subscriptions
        if len(args.entities) != 1:
            raise CliError("client-metrics cannot be combined with another entity type")
        return run_client_metrics(args, args.entities[0][1], args.add_config, deletes)
    for etype, raw, dflt in args.entities:
        if raw is None and not dflt:
            raise CliError(f"--entity-type {etype}: give --entity-name or --entity-default")
    entities = [(_TYPES[t], None if dflt else name) for t, name, dflt in args.entities]
    adds = _pairs(args.add_config)
    if args.alter and not (adds or deletes):
        raise CliError("--alter needs --add-config and/or --delete-config")
    if any(t == "brokers" for t, _ in entities):
        if len(entities) != 1:
            raise CliError("brokers cannot be combined with another entity type")
        name = entities[0][1]
        if name is None:
            return _broker_default(args, adds, deletes)
        return _brokers(args, name, adds, deletes)
    return _quotas(args, entities, adds, deletes)


def _quotas(args: argparse.Namespace, entities: list[tuple[str, str | None]],
            adds: dict[str, str], deletes: list[str]) -> int:
    entity = [{"entity_type": t, "entity_name": n} for t, n in entities]
    with protocol_client(args) as client:
        conn = client.any_connection()
        if args.alter:
            ops = [{"key": k, "value": _quota(k, v), "remove": False} for k, v in adds.items()]
            ops += [{"key": k, "value": 0.0, "remove": True} for k in deletes]
            resp = conn.call(49, 1, {"entries": [{"entity": entity, "ops": ops}],
                                     "validate_only": False})
            entry = resp.entries[0]
            if int(entry.error_code):
                raise CliError(f"{entry.error_message or int(entry.error_code)}")
            print(f"Completed updating config for {_describe_entity(entities)}.")
            return 0
        components = [{"entity_type": t, "match_type": 1 if n is None else 0, "match": n}
                      for t, n in entities]
        resp = conn.call(48, 1, {"components": components, "strict": True})
        if int(resp.error_code):
            raise CliError(f"{resp.error_message or int(resp.error_code)}")
        for e in resp.entries or ():
            values = ", ".join(f"{v.key}={_num(v.value)}" for v in e.values)
            named = [(x.entity_type, x.entity_name) for x in e.entity]
            print(f"Quota configs for {_describe_entity(named)} are {values}")
    return 0


def _quota(key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:  # Kafka's ConfigCommand's words
        raise CliError(f"Cannot parse quota configuration value for {key}: {value}") from None


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _describe_entity(entities: list[tuple[str, str | None]]) -> str:
    words = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    return ", ".join(f"{words[t]} '{n}'" if n is not None else f"the default {words[t]}"
                     for t, n in entities)


def _brokers(args: argparse.Namespace, name: str, adds: dict[str, str],
             deletes: list[str]) -> int:
    from confluent_kafka import admin

    client = make_client(admin.AdminClient, client_config(args, {}, {}))
    if args.alter:
        entries = [admin.ConfigEntry(k, v, incremental_operation=admin.AlterConfigOpType.SET)
                   for k, v in adds.items()]
        entries += [admin.ConfigEntry(k, None,
                                      incremental_operation=admin.AlterConfigOpType.DELETE)
                    for k in deletes]
        res = admin.ConfigResource(admin.ResourceType.BROKER, name, incremental_configs=entries)
        future = client.incremental_alter_configs([res])[res]
        wait(future, TIMEOUT_S, f"broker {name or '<default>'}")
        print(f"Completed updating config for broker {name or '<default>'}.")
        return 0
    res = admin.ConfigResource(admin.ResourceType.BROKER, name)
    configs = wait(client.describe_configs([res])[res], TIMEOUT_S, f"broker {name}")
    dynamic = {admin.ConfigSource.DYNAMIC_BROKER_CONFIG.value,
               admin.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}
    print(f"Dynamic configs for broker {name} are:")
    for key, entry in sorted(configs.items()):
        if entry.source in dynamic:
            print(f"  {key}={entry.value} sensitive={str(entry.is_sensitive).lower()}")
    return 0


BROKER = 4  # ConfigResource.Type BROKER
DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # DescribeConfigs' config source


def _broker_default(args: argparse.Namespace, adds: dict[str, str], deletes: list[str]) -> int:
    """The cluster-wide broker default (resource name ""), as ``kafka-configs.sh
    --entity-type brokers --entity-default``: librdkafka refuses a BROKER resource without a
    name, so tidelog's own protocol client sends the request."""
    with protocol_client(args) as client:
        conn = client.any_connection()
        if args.alter:
            ops = [{"name": k, "config_operation": 0, "value": v} for k, v in adds.items()]
            ops += [{"name": k, "config_operation": 1, "value": None} for k in deletes]
            resp = conn.call(44, 1, {"resources": [{"resource_type": BROKER, "resource_name": "",
                                                    "configs": ops}], "validate_only": False})
            check_answer(resp.responses[0])
            print("Completed updating default config for brokers in the cluster.")
            return 0
        resp = conn.call(32, 4, {"resources": [{"resource_type": BROKER, "resource_name": "",
                                                "configuration_keys": None}],
                                 "include_synonyms": False, "include_documentation": False})
        result = resp.results[0]
        check_answer(result)
    print("Default configs for brokers in the cluster are:")
    for c in sorted(result.configs, key=lambda c: str(c.name)):
        if int(c.config_source) == DYNAMIC_DEFAULT_BROKER_CONFIG:
            print(f"  {c.name}={c.value} sensitive={str(bool(c.is_sensitive)).lower()}")
    return 0
