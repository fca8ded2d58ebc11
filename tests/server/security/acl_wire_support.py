"""A broker with the StandardAuthorizer on a SASL_PLAINTEXT listener, PLAIN users, and raw
per-API calls as a given user (for the ACL matrix tests)."""

from __future__ import annotations

import socket
from typing import Any

from sasl_wire_support import call

from tidelog.protocol.codec import request_class
from tidelog.protocol.kio_util import make, nested
from tidelog.records.builder import build_batch
from tidelog.testing import EmbeddedBroker

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")


def acl_broker_props(**extra: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "true",
    }
    props.update(extra)
    return props


class As:
    """An authenticated raw connection for one user."""

    def __init__(self, b: EmbeddedBroker, user: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        self.corr = 0
        assert self.call(17, 1, mechanism="PLAIN").error_code == 0
        token = f"\x00{user}\x00{PASSWORDS[user]}".encode()
        assert self.call(36, 2, auth_bytes=token).error_code == 0

    def call(self, api_key: int, version: int, **kw: Any) -> Any:
        self.corr += 1
        return call(self.sock, api_key, version, self.corr, **kw)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> As:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call per API, answering the error code(s) of interest --------------------------
    def produce(self, topic: str, transactional_id: str | None = None) -> int:
        cls = request_class(0, 9)
        tcls = nested(cls, "topic_data")
        pcls = nested(tcls, "partition_data")
        records = build_batch([(0, None, b"v")])
        resp = self.call(0, 9, transactional_id=transactional_id, acks=1, timeout=5000,
                         topic_data=(make(tcls, name=topic, partition_data=(
                             make(pcls, index=0, records=records),)),))
        return int(resp.responses[0].partition_responses[0].error_code)

    def fetch(self, topic: str) -> int:
        cls = request_class(1, 12)
        tcls = nested(cls, "topics")
        pcls = nested(tcls, "partitions")
        resp = self.call(1, 12, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1,
                         forgotten_topics_data=(), rack_id="",
                         topics=(make(tcls, topic=topic, partitions=(make(
                             pcls, partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                             log_start_offset=-1, current_leader_epoch=-1,
                             last_fetched_epoch=-1),)),))
        return int(resp.responses[0].partitions[0].error_code)

    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> dict[str, int]:
        cls = request_class(3, 12)
        tcls = nested(cls, "topics")
        asked = None if topics is None else tuple(make(tcls, name=t) for t in topics)
        resp = self.call(3, 12, topics=asked, allow_auto_topic_creation=auto_create,
                         include_topic_authorized_operations=False)
        return {t.name: int(t.error_code) for t in resp.topics}

    def list_offsets(self, topic: str) -> int:
        cls = request_class(2, 7)
        tcls = nested(cls, "topics")
        pcls = nested(tcls, "partitions")
        resp = self.call(2, 7, replica_id=-1, isolation_level=0, topics=(make(
            tcls, name=topic, partitions=(make(pcls, partition_index=0, timestamp=-1,
                                                current_leader_epoch=-1),)),))
        return int(resp.topics[0].partitions[0].error_code)
