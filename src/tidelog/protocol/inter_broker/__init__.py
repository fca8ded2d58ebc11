"""Schemas of the inter-broker messages Kafka 4 removed: LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6) and ControlledShutdown (7).

Why they live here: kio follows Kafka 4's message definitions, and Kafka 4 dropped these four
APIs with ZooKeeper mode, so kio 0.6 no longer carries them. A ZooKeeper-mode cluster speaks
them between its controller and its brokers, as Kafka 3.x does. Each module holds one API
version, request and response, written from Kafka 3.6's
``clients/src/main/resources/common/message/<Name>{Request,Response}.json`` in kio's own
declarative form (frozen dataclasses whose field metadata names the Kafka type, nested structs
as their own classes, ``__flexible__`` for compact encodings and tagged fields), so kio's
serializers read and write them like any of its own schemas, and field names match what kio's
generator produced for these messages before it dropped them.

Only the versions the cluster speaks are here: LeaderAndIsr 5-7 (topic ids), StopReplica 3-4
(leader epochs), UpdateMetadata 7-8 (topic ids), ControlledShutdown 3. All are flexible
versions (request header v2, response header v1). ``tidelog.protocol.codec`` falls back to
:func:`request_schema` / :func:`response_schema` for API keys kio does not know, so handlers
register for them like any other API.
"""

from __future__ import annotations

import importlib

LEADER_AND_ISR_KEY = 4
STOP_REPLICA_KEY = 5
UPDATE_METADATA_KEY = 6
CONTROLLED_SHUTDOWN_KEY = 7

# (api key, version) -> (module in this package, class name prefix); a module is imported
# by the first message of its version (a broker outside a cluster never loads them)
_MODULES: dict[tuple[int, int], tuple[str, str]] = {
    (LEADER_AND_ISR_KEY, 5): ("leader_and_isr_v5", "LeaderAndIsr"),
    (LEADER_AND_ISR_KEY, 6): ("leader_and_isr_v6", "LeaderAndIsr"),
    (LEADER_AND_ISR_KEY, 7): ("leader_and_isr_v7", "LeaderAndIsr"),
    (STOP_REPLICA_KEY, 3): ("stop_replica_v3", "StopReplica"),
    (STOP_REPLICA_KEY, 4): ("stop_replica_v4", "StopReplica"),
    (UPDATE_METADATA_KEY, 7): ("update_metadata_v7", "UpdateMetadata"),
    (UPDATE_METADATA_KEY, 8): ("update_metadata_v8", "UpdateMetadata"),
    (CONTROLLED_SHUTDOWN_KEY, 3): ("controlled_shutdown_v3", "ControlledShutdown"),
}

# (api key) -> (lowest, highest) version held here
VERSIONS: dict[int, tuple[int, int]] = {
    LEADER_AND_ISR_KEY: (5, 7),
    STOP_REPLICA_KEY: (3, 4),
    UPDATE_METADATA_KEY: (7, 8),
    CONTROLLED_SHUTDOWN_KEY: (3, 3),
}


def _schema(api_key: int, api_version: int, kind: str) -> type | None:
    found = _MODULES.get((api_key, api_version))
    if found is None:
        return None
    module_name, name = found
    module = importlib.import_module(f"{__name__}.{module_name}")
    cls: type = getattr(module, name + kind)
    return cls


def request_schema(api_key: int, api_version: int) -> type | None:
    """The request class of one inter-broker API version, or None if not held here."""
    return _schema(api_key, api_version, "Request")


def response_schema(api_key: int, api_version: int) -> type | None:
    """The response class of one inter-broker API version, or None if not held here."""
    return _schema(api_key, api_version, "Response")
