"""The RemoteStorageManager from Kafka's ``rsm.config.*`` properties, with the names of
Aiven's tiered-storage plugin, so a server.properties written for Kafka with that plugin
works as is."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .object_storage import ObjectStorage
from .storage_manager import RemoteStorageManager

RSM_CONFIG_PREFIX = "rsm.config."
"""Kafka's ``remote.log.storage.manager.impl.prefix`` default."""

STORAGE_BACKEND_CLASS = "storage.backend.class"
STORAGE_ROOT = "storage.root"
S3_ENDPOINT_URL = "storage.s3.endpoint.url"
S3_BUCKET_NAME = "storage.s3.bucket.name"
S3_REGION = "storage.s3.region"
S3_PATH_STYLE_ACCESS_ENABLED = "storage.s3.path.style.access.enabled"
AWS_ACCESS_KEY_ID = "storage.aws.access.key.id"
AWS_SECRET_ACCESS_KEY = "storage.aws.secret.access.key"
S3_API_CALL_ATTEMPT_TIMEOUT = "storage.s3.api.call.attempt.timeout"
"""Aiven's per-attempt timeout (ms): the connect and read timeouts of each S3 request."""
KEY_PREFIX = "key.prefix"

S3_BACKEND_CLASSES = frozenset({"io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
                                "tidelog.storage.remote.s3.S3Storage"})
FILESYSTEM_BACKEND_CLASSES = frozenset({
    "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
    "tidelog.storage.remote.filesystem.FileSystemStorage"})


def rsm_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """The RSM's own configs: keys under ``rsm.config.`` with the prefix removed (as
    Kafka's ``RemoteLogManagerConfig.remoteStorageManagerProps``); keys already without it
    are kept as they are."""
    out: dict[str, str] = {}
    for key, value in configs.items():
        if key.startswith(RSM_CONFIG_PREFIX):
            out[key[len(RSM_CONFIG_PREFIX):]] = value
        else:
            out.setdefault(key, value)
    return out


def create_remote_storage_manager(configs: Mapping[str, str]) -> RemoteStorageManager:
    """Configure and return the RemoteStorageManager (the backend is checked now:
    :class:`~tidelog.storage.remote.storage_manager.RemoteStorageError` when it does not
    work; ``ValueError`` for a missing or unknown config)."""
    from .rsm import RemoteStorageManager as ObjectRemoteStorageManager

    own = rsm_configs(configs)
    return ObjectRemoteStorageManager(create_object_storage(own), own.get(KEY_PREFIX, ""))


def _required(configs: Mapping[str, str], key: str) -> str:
    value = configs.get(key, "").strip()
    if not value:
        raise ValueError(f"{RSM_CONFIG_PREFIX}{key} must be set")
    return value


def _bool(configs: Mapping[str, str], key: str, default: bool) -> bool:
    raw = configs.get(key, "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise ValueError(f"{RSM_CONFIG_PREFIX}{key} must be true or false, not {raw!r}")
    return raw == "true"


def _attempt_timeout(configs: Mapping[str, str]) -> float | None:
    """``storage.s3.api.call.attempt.timeout`` in seconds, or None when not set."""
    raw = configs.get(S3_API_CALL_ATTEMPT_TIMEOUT, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) <= 0:
        raise ValueError(f"{RSM_CONFIG_PREFIX}{S3_API_CALL_ATTEMPT_TIMEOUT} must be a positive "
                         f"number of milliseconds, not {raw!r}")
    return int(raw) / 1000


def create_object_storage(configs: Mapping[str, str]) -> ObjectStorage:
    """The backend ``storage.backend.class`` names, from the RSM's own (prefix-less)
    configs."""
    backend = _required(configs, STORAGE_BACKEND_CLASS)
    if backend in FILESYSTEM_BACKEND_CLASSES:
        from .filesystem import FileSystemStorage

        return FileSystemStorage(Path(_required(configs, STORAGE_ROOT)))
    if backend in S3_BACKEND_CLASSES:
        from .s3 import S3Storage

        timeout = _attempt_timeout(configs)
        return S3Storage(
            bucket=_required(configs, S3_BUCKET_NAME),
            endpoint_url=configs.get(S3_ENDPOINT_URL) or None,
            region=configs.get(S3_REGION) or None,
            path_style_access=_bool(configs, S3_PATH_STYLE_ACCESS_ENABLED, False),
            access_key_id=configs.get(AWS_ACCESS_KEY_ID) or None,
            secret_access_key=configs.get(AWS_SECRET_ACCESS_KEY) or None,
            connect_timeout=timeout or 5.0, read_timeout=timeout or 30.0)
    known = sorted(S3_BACKEND_CLASSES | FILESYSTEM_BACKEND_CLASSES)
    raise ValueError(f"{RSM_CONFIG_PREFIX}{STORAGE_BACKEND_CLASS}={backend!r} is not one of "
                     f"{', '.join(known)}")
