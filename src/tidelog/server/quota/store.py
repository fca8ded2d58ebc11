"""The client quota values (Kafka keeps them in the metadata log as ClientQuotaRecords; here
one JSON file in the first log dir, rewritten atomically). An entity is a set of
(entity type, name) components, a name of None meaning the type's default entity."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from tidelog.storage.checkpoints import write_atomically

QUOTAS_FILE = "client-quotas.json"
USER, CLIENT_ID, IP = "user", "client-id", "ip"
# quota key -> integral value required (Kafka's LONG keys) (QuotaConfig)
CLIENT_KEYS = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}
IP_KEYS = {"connection_creation_rate": True}

QuotaEntity = tuple[tuple[str, str | None], ...]  # sorted by entity type


class QuotaError(ValueError):
    """Answered INVALID_REQUEST with this message, as Kafka's controller does."""


def entity(components: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    out: dict[str, str | None] = {}
    for etype, name in components:
        if etype in out:
            raise QuotaError(f"Duplicate {etype} entity type in entity")
        if etype not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unrecognized entity type {etype}")
        out[etype] = name
    if not out:
        raise QuotaError("Invalid empty client quota entity")
    if IP in out and len(out) > 1:
        raise QuotaError("Invalid quota entity combination, IP entity should not be combined "
                         "with User or ClientId")
    return tuple(sorted(out.items()))


def validate(ent: QuotaEntity, key: str, value: float | None) -> None:
    keys = IP_KEYS if ent[0][0] == IP else CLIENT_KEYS
    if key not in keys:
        raise QuotaError(f"Invalid configuration key {key}")
    if value is None:
        return
    if value <= 0:
        raise QuotaError(f"Invalid value {value} for configuration key {key}: must be positive")
    if keys[key] and value != int(value):
        raise QuotaError(f"Configuration {key} must be a Long value")


def _any_request_quota(entries: dict[QuotaEntity, dict[str, float]]) -> bool:
    return any("request_percentage" in values for values in entries.values())


class ClientQuotaStore:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / QUOTAS_FILE
        self._lock = threading.Lock()
        self.entries: dict[QuotaEntity, dict[str, float]] = {}
        self.version = 0  # bumped on every change (the manager re-resolves its quotas)
        # any request_percentage at all: every request is timed only then (request.py)
        self.has_request_quota = False
        if self.path.exists():
            for e in json.loads(self.path.read_bytes()):
                ent = tuple(sorted((k, v) for k, v in e["entity"].items()))
                self.entries[ent] = {k: float(v) for k, v in e["values"].items()}
            self.has_request_quota = _any_request_quota(self.entries)

    def alter(self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]) -> None:
        """Apply (entity, {key: value, or None to remove}) and persist, all or nothing."""
        with self._lock:
            updated = {k: dict(v) for k, v in self.entries.items()}
            for ent, ops in changes:
                values = updated.setdefault(ent, {})
                for key, value in ops.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del updated[ent]
            doc = [{"entity": dict(ent), "values": vals} for ent, vals in sorted(
                updated.items(), key=lambda kv: repr(kv[0]))]
            write_atomically(self.path, json.dumps(doc, indent=1).encode())
            self.entries = updated
            self.has_request_quota = _any_request_quota(updated)
            self.version += 1

    def get(self, ent: QuotaEntity) -> dict[str, float]:
        return self.entries.get(ent, {})
