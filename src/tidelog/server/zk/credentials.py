"""SCRAM credentials of a ZooKeeper cluster, where Kafka keeps them: in the user's config
znode ``/config/users/<user>`` (beside the user's quotas), one entry per mechanism
``"SCRAM-SHA-256": "salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>"``
(Kafka's ScramCredentialUtils), announced under ``/config/changes`` (``users/<user>``, read
by the ``users`` handler of the broker's change listener), so a user created through one
broker authenticates on every broker.
"""

from __future__ import annotations

import base64
from urllib.parse import quote, unquote

from tidelog.protocol.scram import ScramCredential, ScramMechanism

from ..security.credentials import CredentialStore
from .change_notifications import ConfigHandler, ZkNodeChangeNotificationListener
from .client import KafkaZkClient

Users = dict[str, dict[ScramMechanism, ScramCredential]]


def credential_to_string(c: ScramCredential) -> str:
    b64 = base64.b64encode
    return (f"salt={b64(c.salt).decode()},stored_key={b64(c.stored_key).decode()},"
            f"server_key={b64(c.server_key).decode()},iterations={c.iterations}")  # fmt: skip


def credential_from_string(text: str) -> ScramCredential:
    fields = dict(part.split("=", 1) for part in text.split(","))
    return ScramCredential(
        base64.b64decode(fields["salt"]),
        base64.b64decode(fields["stored_key"]),
        base64.b64decode(fields["server_key"]),
        int(fields["iterations"]),
    )


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client id as a znode name (Java's URLEncoder,
    with "*" as %2A and a space as %20; "~" is encoded too)."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize."""
    return unquote(name)


class ZkCredentialStore(CredentialStore):
    """CredentialStore over ``/config/users`` (``load`` once the session is up).
    ``changes``: the broker's ``/config/changes`` listener (its own when None)."""

    def __init__(self, zk: KafkaZkClient,
                 changes: ZkNodeChangeNotificationListener | None = None) -> None:  # fmt: skip
        super().__init__(None)
        self.zk = zk
        self._stored: Users = {}
        self.changes = changes if changes is not None else ZkNodeChangeNotificationListener(zk)
        self.changes.add_handler(ConfigHandler("users", self._user_changed, self._read_all))

    def load(self) -> None:
        self.changes.arm()
        self._read_all()

    def _read_all(self) -> None:
        users: Users = {}
        for name in self.zk.get_children("/config/users"):
            creds = self._read(name)
            if creds:
                users[desanitize(name)] = creds
        with self._lock:
            self._users = {u: dict(m) for u, m in users.items()}
            self._stored = {u: dict(m) for u, m in users.items()}

    def _read(self, sanitized: str) -> dict[ScramMechanism, ScramCredential]:
        config = self.zk.get_entity_configs("users", sanitized)
        out = {}
        for key, value in config.items():
            mech = ScramMechanism.by_name(key)
            if mech is not None:
                out[mech] = credential_from_string(value)
        return out

    def _user_changed(self, name: str) -> None:
        """kazoo's thread: a user's config changed somewhere; read that user again."""
        creds = self._read(name)
        with self._lock:
            user = desanitize(name)
            if creds:
                self._users[user] = creds
            else:
                self._users.pop(user, None)
            self._stored[user] = dict(creds)

    def _save(self) -> None:
        """Called under the lock with the new credentials: rewrite each user whose SCRAM
        entries changed, keeping the user's other configs (quotas), and announce it."""
        for user in set(self._users) | set(self._stored):
            new = self._users.get(user, {})
            if new == self._stored.get(user, {}):
                continue
            name = sanitize(user)
            config = {k: v for k, v in self.zk.get_entity_configs("users", name).items()
                      if ScramMechanism.by_name(k) is None}  # fmt: skip
            config.update({m.mechanism_name: credential_to_string(c) for m, c in new.items()})
            self.zk.set_or_create_entity_configs("users", name, config)
        self._stored = {u: dict(m) for u, m in self._users.items()}
