"""Options of path mode on a tiered-storage bucket: ``path`` = ``s3://bucket/prefix``.

The bucket is reached with the RemoteStorageManager's own configs (Aiven's names under
Kafka's ``rsm.config.`` prefix, exactly as a broker's server.properties spells them) or,
for Spark users, the Hadoop S3A names of the same settings:

=====================================================  ===========================
``rsm.config.storage.s3.endpoint.url``                 ``fs.s3a.endpoint``
``rsm.config.storage.s3.region``                       ``fs.s3a.endpoint.region``
``rsm.config.storage.s3.path.style.access.enabled``    ``fs.s3a.path.style.access``
``rsm.config.storage.aws.access.key.id``               ``fs.s3a.access.key``
``rsm.config.storage.aws.secret.access.key``           ``fs.s3a.secret.key``
=====================================================  ===========================

The bucket and the key prefix come from the path (``rsm.config.storage.s3.bucket.name`` /
``rsm.config.key.prefix`` may repeat them, not contradict them). Credentials must be given
(options, or ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` in the environment): a read
without them fails at planning with one message naming the options.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tidelog.storage.remote.factory import (
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    KEY_PREFIX,
    RSM_CONFIG_PREFIX,
    S3_API_CALL_ATTEMPT_TIMEOUT,
    S3_BUCKET_NAME,
    S3_ENDPOINT_URL,
    S3_PATH_STYLE_ACCESS_ENABLED,
    S3_REGION,
    STORAGE_BACKEND_CLASS,
)

from .kafka_params import OptionError

REMOTE_SCHEMES = ("s3://", "s3a://")
S3_BACKEND = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
S3A_NAMES = {
    "fs.s3a.endpoint": S3_ENDPOINT_URL,
    "fs.s3a.endpoint.region": S3_REGION,
    "fs.s3a.path.style.access": S3_PATH_STYLE_ACCESS_ENABLED,
    "fs.s3a.access.key": AWS_ACCESS_KEY_ID,
    "fs.s3a.secret.key": AWS_SECRET_ACCESS_KEY,
}
_RSM_KEYS = (S3_ENDPOINT_URL, S3_REGION, S3_PATH_STYLE_ACCESS_ENABLED, AWS_ACCESS_KEY_ID,
             AWS_SECRET_ACCESS_KEY, S3_BUCKET_NAME, KEY_PREFIX, STORAGE_BACKEND_CLASS,
             S3_API_CALL_ATTEMPT_TIMEOUT)
REMOTE_OPTIONS = frozenset({RSM_CONFIG_PREFIX + k for k in _RSM_KEYS} | set(S3A_NAMES)
                           | {"remotelogmetadata"})

RemoteConfigs = tuple[tuple[str, str], ...]


def is_remote_path(path: str) -> bool:
    return path.strip().lower().startswith(REMOTE_SCHEMES)


def _split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` -> ("bucket", "a/b/"); ``s3://bucket`` -> ("bucket", "")."""
    rest = url.strip().split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise OptionError(f"path {url!r} names no bucket (expected s3://bucket/prefix)")
    prefix = prefix.strip("/")
    return bucket, f"{prefix}/" if prefix else ""


def _given(options: Mapping[str, str]) -> dict[str, str]:
    """The RSM configs the options set (prefix-less); an rsm.config name and its S3A twin
    with different values contradict each other."""
    out: dict[str, str] = {}
    for key in _RSM_KEYS:
        value = options.get(RSM_CONFIG_PREFIX + key)
        if value is not None:
            out[key] = value
    for s3a, key in S3A_NAMES.items():
        value = options.get(s3a)
        if value is None:
            continue
        if key in out and out[key] != value:
            raise OptionError(f"options {s3a} and {RSM_CONFIG_PREFIX}{key} contradict each other")
        out[key] = value
    return out


def _check_same(configs: dict[str, str], key: str, value: str, url: str) -> None:
    given = configs.get(key)
    if given is not None and given != value:
        raise OptionError(f"option {RSM_CONFIG_PREFIX}{key}={given!r} contradicts path {url!r}")


def remote_configs(paths: tuple[str, ...], options: Mapping[str, str]) -> RemoteConfigs:
    """The RemoteStorageManager configs (prefix-less, as ``create_object_storage`` takes
    them) of a read on ``s3://bucket/prefix``, checked."""
    if len(paths) != 1:
        raise OptionError(f"path mode on a bucket reads one s3://bucket/prefix, got {len(paths)} paths")
    url = paths[0]
    bucket, prefix = _split_url(url)
    configs = _given(options)
    _check_same(configs, S3_BUCKET_NAME, bucket, url)
    if prefix:
        _check_same(configs, KEY_PREFIX, prefix, url)
    backend = configs.get(STORAGE_BACKEND_CLASS, S3_BACKEND)
    if not backend.endswith("S3Storage"):
        raise OptionError(f"path {url!r} is S3: {RSM_CONFIG_PREFIX}{STORAGE_BACKEND_CLASS} "
                          f"must be an S3Storage, got {backend!r}")
    configs.update({STORAGE_BACKEND_CLASS: backend, S3_BUCKET_NAME: bucket})
    configs.setdefault(KEY_PREFIX, prefix)
    _check_credentials(configs, url)
    return tuple(sorted(configs.items()))


def _check_credentials(configs: dict[str, str], url: str) -> None:
    key_id = configs.get(AWS_ACCESS_KEY_ID) or os.environ.get("AWS_ACCESS_KEY_ID")
    secret = configs.get(AWS_SECRET_ACCESS_KEY) or os.environ.get("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:
        return
    missing = [name for name, v in ((AWS_ACCESS_KEY_ID, key_id), (AWS_SECRET_ACCESS_KEY, secret)) if not v]
    raise OptionError(
        f"path {url!r} needs S3 credentials: set option(s) "
        + " and ".join(f"{RSM_CONFIG_PREFIX}{m}" for m in missing)
        + " (or fs.s3a.access.key / fs.s3a.secret.key, or AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY in the environment)")
