"""Client quotas of a ZooKeeper cluster, where Kafka keeps them (ZkAdminManager.
alterClientQuotas, AdminZkClient.changeConfigs): one config znode per entity,
``{"version":1,"config":{"producer_byte_rate":"1024","request_percentage":"50.0"}}``,

- ``/config/users/<user>`` (beside the user's SCRAM credentials, which are kept),
  ``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>``,
  ``/config/ips/<ip>``; ``<default>`` names a type's default entity; names sanitized as
  Kafka's Sanitizer does;
- values as Kafka's Properties hold them: integral keys (byte rates, connection creation
  rate) as longs, the others as Java doubles ("50.0");
- each change announced under ``/config/changes`` (``users/<u>/clients/<c>``, ...); an entity
  left with no config and no child entity loses its znode (Kafka's tryCleanQuotaNodes).

Any broker accepts AlterClientQuotas and writes ZooKeeper; every broker's quota manager
reads the entity again when the notification comes (``ConfigHandler``s for ``users``,
``clients`` and ``ips``), and DescribeClientQuotas answers from that shared state.
"""

from __future__ import annotations

import functools
import logging
import threading
from decimal import Decimal

from kazoo.exceptions import NoNodeError

from ..quota.store import CLIENT_ID, CLIENT_KEYS, IP, IP_KEYS, USER, ClientQuotaStore, QuotaEntity
from . import data as z
from .change_notifications import ConfigHandler
from .client import KafkaZkClient
from .credentials import desanitize, sanitize

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default
USERS, CLIENTS, IPS = "users", "clients", "ips"
Entries = dict[QuotaEntity, dict[str, float]]


def java_double(value: float) -> str:
    """Java's Double.toString: shortest digits, "50.0"; scientific ("1.0E7") outside
    [1e-3, 1e7)."""
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exponent}"


def _name(name: str | None) -> str:
    return DEFAULT_ENTITY if name is None else sanitize(name)


def _unname(name: str) -> str | None:
    return None if name == DEFAULT_ENTITY else desanitize(name)


def entity_znode(ent: QuotaEntity) -> tuple[str, str]:
    """(config type, sanitized entity path under it) of a quota entity."""
    names = dict(ent)
    if IP in names:
        return IPS, _name(names[IP])
    if USER in names and CLIENT_ID in names:
        return USERS, f"{_name(names[USER])}/clients/{_name(names[CLIENT_ID])}"
    if USER in names:
        return USERS, _name(names[USER])
    return CLIENTS, _name(names[CLIENT_ID])


def znode_entity(config_type: str, path: str) -> QuotaEntity | None:
    """The quota entity of a config znode (None: not a quota entity)."""
    if config_type == USERS:
        user, sep, client = path.partition("/clients/")
        if sep:
            return (CLIENT_ID, _unname(client)), (USER, _unname(user))
        return ((USER, _unname(user)),)
    if config_type == CLIENTS:
        return ((CLIENT_ID, _unname(path)),)
    if config_type == IPS:
        return ((IP, _unname(path)),)
    return None


def _nothing() -> None:
    return None


def _quota_values(config_type: str, config: dict[str, str]) -> dict[str, float]:
    keys = IP_KEYS if config_type == IPS else CLIENT_KEYS
    out = {}
    for k, v in config.items():
        if k in keys:
            try:
                out[k] = float(v)
            except ValueError:
                log.error("quota %s=%r is not a number: ignored", k, v)
    return out


def _stored_value(config_type: str, key: str, value: float) -> str:
    integral = (IP_KEYS if config_type == IPS else CLIENT_KEYS)[key]
    return str(int(value)) if integral else java_double(value)


class ZkClientQuotaStore(ClientQuotaStore):
    """The quota manager's store over ``/config`` (``load`` once the session is up)."""

    def __init__(self, zk: KafkaZkClient) -> None:  # no file: ZooKeeper holds it all
        self.zk = zk
        self._lock = threading.Lock()
        self.entries: Entries = {}
        self.version = 0
        self.has_request_quota = False

    def handlers(self) -> list[ConfigHandler]:
        return [ConfigHandler(t, functools.partial(self.refresh, t),
                              self.load if t == USERS else _nothing)
                for t in (USERS, CLIENTS, IPS)]  # fmt: skip  # one reload reads them all

    # --- reads -----------------------------------------------------------------------------------

    def load(self) -> None:
        """Every quota entity, read whole."""
        entries: Entries = {}
        for config_type in (USERS, CLIENTS, IPS):
            for name in self.zk.get_children(f"/config/{config_type}"):
                self._read_into(entries, config_type, name)
                if config_type == USERS:
                    for client in self.zk.get_children(f"/config/users/{name}/clients"):
                        self._read_into(entries, USERS, f"{name}/clients/{client}")
        with self._lock:
            self._publish(entries)

    def _read_into(self, entries: Entries, config_type: str, path: str) -> None:
        ent = znode_entity(config_type, path)
        if ent is None:
            return
        values = _quota_values(config_type, self.zk.get_entity_configs(config_type, path))
        if values:
            entries[ent] = values
        else:
            entries.pop(ent, None)

    def refresh(self, config_type: str, path: str) -> None:
        """One entity changed (a notification, or our own write): read it again."""
        with self._lock:
            entries = {k: dict(v) for k, v in self.entries.items()}
            self._read_into(entries, config_type, path)
            self._publish(entries)

    def _publish(self, entries: Entries) -> None:
        self.entries = entries  # replaced whole: the loop reads it without the lock
        self.has_request_quota = any("request_percentage" in v for v in entries.values())
        self.version += 1

    # --- writes ----------------------------------------------------------------------------------

    def alter(self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]) -> None:
        """Each entity's znode read, changed and written back with its other keys (a
        user's SCRAM credentials) kept, then announced; read back into the entries."""
        for ent, ops in changes:
            config_type, path = entity_znode(ent)
            props = self.zk.get_entity_configs(config_type, path)
            for key, value in ops.items():
                if value is None:
                    props.pop(key, None)
                else:
                    props[key] = _stored_value(config_type, key, value)
            self._change_entity_config(config_type, path, props)
            self.refresh(config_type, path)

    def _change_entity_config(self, config_type: str, path: str, props: dict[str, str]) -> None:
        """AdminZkClient.changeEntityConfig."""
        if props or not self._try_clean(config_type, path):
            self.zk.set_or_create_entity_configs(config_type, path, props, notify=False)
        self.zk.create_config_change_notification(f"{config_type}/{path}")

    def _try_clean(self, config_type: str, path: str) -> bool:
        """AdminZkClient.tryCleanQuotaNodes: an empty entity without children goes (and a
        user's ``clients`` node, and the user's, once nothing is left under them)."""
        znode = z.config_entity_path(config_type, path)
        if self.zk.get_children(znode):
            return False
        doomed = znode
        user, sep, client = path.partition("/clients/")
        if config_type == USERS and sep:
            clients = z.config_entity_path(USERS, f"{user}/clients")
            if self.zk.get_children(clients) == [client]:
                doomed = clients
                user_znode = z.config_entity_path(USERS, user)
                if (not self.zk.get_entity_configs(USERS, user)
                        and self.zk.get_children(user_znode) == ["clients"]):  # fmt: skip
                    doomed = user_znode
        try:
            self.zk.zk.delete(doomed, recursive=True)
        except NoNodeError:
            pass
        return True
