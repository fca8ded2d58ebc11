"""SCRAM credentials that survive restarts (what AlterUserScramCredentials writes).

Kafka keeps them as UserScramCredentialRecords in the KRaft ``__cluster_metadata`` log. A
single-node tidelog keeps its cluster metadata in ``<first log dir>/tidelog-metadata.json``
(server/metadata/local_store.py), so credentials sit beside it in
``tidelog-scram-credentials.json``, written the same crash-safe way (tmp + fsync + rename +
dir fsync). A compacted internal topic would need the log layer up and replayed before the
first client can authenticate, and would hand the credentials to any client allowed to read
internal topics; a file in the log dir has neither problem. Only salt, StoredKey, ServerKey
and iterations are stored, never a password.
"""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path

from tidelog.util.files import atomic_write

from .scram import ScramCredential, ScramMechanism

CREDENTIALS_FILE = "tidelog-scram-credentials.json"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class CredentialStore:
    def __init__(self, log_dir: Path | None) -> None:
        self.path = log_dir / CREDENTIALS_FILE if log_dir is not None else None
        self._lock = threading.Lock()
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        data = json.loads(path.read_text())
        for user, mechs in data.get("users", {}).items():
            for name, c in mechs.items():
                mech = ScramMechanism.by_name(name)
                if mech is None:
                    continue
                self._users.setdefault(user, {})[mech] = ScramCredential(
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )

    def _save(self) -> None:
        if self.path is None:
            return
        users = {
            user: {
                mech.mechanism_name: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mech, c in mechs.items()
            }
            for user, mechs in sorted(self._users.items())
        }
        atomic_write(self.path, json.dumps({"version": 1, "users": users}, indent=1).encode())

    def get(self, user: str, mech: ScramMechanism) -> ScramCredential | None:
        return self._users.get(user, {}).get(mech)

    def users(self) -> dict[str, dict[ScramMechanism, ScramCredential]]:
        return {u: dict(m) for u, m in self._users.items()}

    def apply(
        self,
        upserts: list[tuple[str, ScramMechanism, ScramCredential]],
        deletions: list[tuple[str, ScramMechanism]],
    ) -> None:
        """Apply one AlterUserScramCredentials batch and persist it once."""
        with self._lock:
            for user, mech in deletions:
                mechs = self._users.get(user, {})
                mechs.pop(mech, None)
                if not mechs:
                    self._users.pop(user, None)
            for user, mech, credential in upserts:
                self._users.setdefault(user, {})[mech] = credential
            self._save()
