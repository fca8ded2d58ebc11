"""``tidelog configs --entity-type client-metrics``: KIP-714 client metrics subscriptions,
as kafka-configs.sh alters and describes them (IncrementalAlterConfigs / DescribeConfigs /
ListConfigResources on the CLIENT_METRICS resource, through tidelog's own protocol client:
confluent-kafka's AdminClient has no such resource type).

    tidelog configs --entity-type client-metrics --entity-name producers --alter \\
        --add-config 'metrics=[org.apache.kafka.producer.],interval.ms=1000,match=[client_id=app-.*]'
"""

from __future__ import annotations

import argparse

from tidelog.cli.client_config import CliError, protocol_client

CLIENT_METRICS = 16
SET, DELETE = 0, 1


def split_configs(text: str) -> dict[str, str]:
    """``k=v,k=[a,b]``: commas inside square brackets belong to the value (a list), as in
    kafka-configs.sh; the brackets go."""
    items: list[str] = []
    depth, current = 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += 1 if ch == "[" else -1 if ch == "]" else 0
        current += ch
    items.append(current)
    out = {}
    for item in filter(None, (x.strip() for x in items)):
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--add-config wants key=value, got {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _error(resp: object) -> str | None:
    code = int(getattr(resp, "error_code", 0))
    return None if code == 0 else str(getattr(resp, "error_message", None) or code)


def run_client_metrics(args: argparse.Namespace, name: str | None, add_config: str,
                       deletes: list[str]) -> int:
    with protocol_client(args) as client:
        conn = client.any_connection()
        if args.alter:
            if not name:
                raise CliError("--entity-type client-metrics --alter needs --entity-name")
            ops = [{"name": k, "config_operation": SET, "value": v}
                   for k, v in split_configs(add_config).items()]
            ops += [{"name": k, "config_operation": DELETE, "value": None} for k in deletes]
            resp = conn.call(44, 1, {"resources": [{"resource_type": CLIENT_METRICS,
                                                    "resource_name": name, "configs": ops}],
                                     "validate_only": False})
            err = _error(resp.responses[0])
            if err:
                raise CliError(err)
            print(f"Completed updating config for client-metric {name}.")
            return 0
        names = [name] if name else sorted(
            r.resource_name for r in conn.call(74, 1, {"resource_types": [CLIENT_METRICS]})
            .config_resources)
        for n in names:
            resp = conn.call(32, 4, {"resources": [{"resource_type": CLIENT_METRICS,
                                                    "resource_name": n,
                                                    "configuration_keys": None}],
                                     "include_synonyms": False, "include_documentation": False})
            result = resp.results[0]
            err = _error(result)
            if err:
                raise CliError(err)
            print(f"Dynamic configs for client-metric {n} are:")
            for c in result.configs:
                if int(c.config_source) == 7:  # set on the subscription, not a default
                    print(f"  {c.name}={c.value} sensitive=false")
    return 0
