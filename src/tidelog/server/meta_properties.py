"""Strict checks of each log dir's ``meta.properties`` at start-up (Kafka's
MetaPropertiesEnsemble.verify): a file that cannot be read or parsed, or that names another
cluster or another node, stops start-up with one line naming the file and the mismatch, so a
disk moved between brokers or clusters is never served under the wrong identity."""

from __future__ import annotations

import re
from pathlib import Path

META_PROPERTIES = "meta.properties"
_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*[=:]\s*(.*?)\s*$")
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class MetaPropertiesError(Exception):
    """Start-up must stop: the message is the one line to log."""


def parse_meta_properties(path: Path) -> dict[str, str]:
    """The file's keys, strictly: every line is a comment, blank or ``key=value``, with
    ``version`` 0 or 1, ``cluster.id`` and (version 1) an integer ``node.id``."""
    try:
        text = path.read_bytes().decode("latin-1")
    except OSError as exc:
        raise MetaPropertiesError(f"Failed to read {path}: {exc.strerror or exc}") from None
    props: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        m = _LINE.match(line)
        if m is None:
            raise MetaPropertiesError(f"Failed to load {path}: line {n} is not key=value")
        props[m.group(1)] = m.group(2)
    version = props.get("version")
    if version not in ("0", "1"):
        raise MetaPropertiesError(f"Failed to load {path}: unsupported version {version!r}")
    cluster = props.get("cluster.id", "")
    if not _CLUSTER_ID.match(cluster):
        raise MetaPropertiesError(f"Failed to load {path}: invalid cluster.id {cluster!r}")
    node = props.get("node.id", props.get("broker.id"))
    if node is None and version == "1":
        raise MetaPropertiesError(f"Failed to load {path}: node.id is missing")
    if node is not None and not re.fullmatch(r"-?\d+", node):
        raise MetaPropertiesError(f"Failed to load {path}: invalid node.id {node!r}")
    return props


def verify_meta_properties(log_dirs: list[Path], node_id: int, cluster_id: str) -> str:
    """Check every existing ``meta.properties`` against the configured ``node_id`` and
    ``cluster_id`` ("" when not configured) and against each other; returns the cluster id
    they agree on ("" when no dir has the file yet)."""
    expected = cluster_id
    first: Path | None = None
    for d in log_dirs:
        path = d / META_PROPERTIES
        if not path.exists():
            continue
        props = parse_meta_properties(path)
        stored = props["cluster.id"]
        if expected and stored != expected:
            source = "configured" if cluster_id else f"read from {first}"
            raise MetaPropertiesError(
                f"Invalid cluster.id in {path}: expected {expected} ({source}), but read {stored}"
            )
        expected, first = stored, first or path
        node = props.get("node.id", props.get("broker.id"))
        if node is not None and int(node) != node_id:
            raise MetaPropertiesError(
                f"Stored node id {node} in {path} doesn't match the configured node.id "
                f"{node_id}. If you moved your data, make sure the configured node id matches."
            )
    return expected


__all__ = [
    "META_PROPERTIES",
    "MetaPropertiesError",
    "parse_meta_properties",
    "verify_meta_properties",
]
