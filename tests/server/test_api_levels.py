"""Kafka 4.x API levels at the wire: Metadata v13, DescribeCluster v2, ApiVersions features,
ListOffsets v8-v11, and authorized operations where the request asks for them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker

OMITTED = -2147483648
TOPIC_OPS, CLUSTER_OPS, GROUP_OPS = 3576, 8096, 328


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def w(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker) as wire:
        yield wire


def metadata(w: Wire, version: int, names: list[str] | None, **kw: Any) -> Any:
    cls = request_class(3, version)
    tcls = nested(cls, "topics")
    topics = None if names is None else tuple(make(tcls, name=n) for n in names)
    return w.call(3, version, body=make(cls, topics=topics, allow_auto_topic_creation=True,
                                        **kw))


@pytest.mark.parametrize("version", [8, 10, 12, 13])
def test_metadata_authorized_operations_when_asked(w: Wire, version: int) -> None:
    asked = metadata(w, version, ["ops-t"], include_topic_authorized_operations=True,
                     include_cluster_authorized_operations=True)
    assert [t.topic_authorized_operations for t in asked.topics] == [TOPIC_OPS]
    if version <= 10:  # KIP-700: the cluster's moved to DescribeCluster from v11
        assert asked.cluster_authorized_operations == CLUSTER_OPS
    not_asked = metadata(w, version, ["ops-t"])
    assert [t.topic_authorized_operations for t in not_asked.topics] == [OMITTED]
    if version <= 10:
        assert not_asked.cluster_authorized_operations == OMITTED


def test_metadata_v13_top_level_error_code(w: Wire) -> None:
    resp = metadata(w, 13, None)
    assert resp.error_code == ErrorCode.NONE
    assert "ops-t" in {t.name for t in resp.topics} or resp.topics == ()


def test_describe_cluster_v2(w: Wire, broker: EmbeddedBroker) -> None:
    resp: Any = w.call(60, 2, include_cluster_authorized_operations=True, endpoint_type=1,
                       include_fenced_brokers=True)
    assert resp.error_code == 0
    assert resp.cluster_authorized_operations == CLUSTER_OPS
    assert [(b.broker_id, b.port, b.is_fenced) for b in resp.brokers] == [
        (broker.broker.node_id, broker.port, False)
    ]
    plain: Any = w.call(60, 2, include_cluster_authorized_operations=False, endpoint_type=1)
    assert plain.cluster_authorized_operations == OMITTED


def test_describe_cluster_for_the_controller_endpoint_is_a_mismatch(w: Wire) -> None:
    resp: Any = w.call(60, 1, include_cluster_authorized_operations=False, endpoint_type=2)
    assert resp.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    assert resp.brokers == ()


def test_describe_groups_authorized_operations(w: Wire) -> None:
    asked: Any = w.call(15, 5, groups=("g-ops",), include_authorized_operations=True)
    assert [g.authorized_operations for g in asked.groups] == [GROUP_OPS]
    plain: Any = w.call(15, 5, groups=("g-ops",), include_authorized_operations=False)
    assert [g.authorized_operations for g in plain.groups] == [OMITTED]


def test_api_versions_features_and_levels(w: Wire) -> None:
    resp: Any = w.call(18, 4, client_software_name="t", client_software_version="1")
    levels = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert levels[1][1] == 18 and levels[2][1] == 11 and levels[3][1] == 13
    assert levels[60][1] == 2
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    assert supported["metadata.version"] == (7, 27)
    assert supported["group.version"] == (0, 1)
    finalized = {f.name: f.max_version_level for f in resp.finalized_features}
    assert finalized == {"metadata.version": 27, "group.version": 1}
    assert resp.finalized_features_epoch == 1
    # before v4 a feature whose range starts at 0 is left out (KAFKA-17492)
    v3: Any = w.call(18, 3, client_software_name="t", client_software_version="1")
    assert {f.name for f in v3.supported_features} == {"metadata.version"}


def list_offsets(w: Wire, version: int, topic: str, ts: int) -> Any:
    cls = request_class(2, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, replica_id=-1, isolation_level=0, timeout=1000, topics=(
        make(tcls, name=topic, partitions=(make(pcls, partition_index=0, timestamp=ts,
                                                current_leader_epoch=-1),)),))
    resp: Any = w.call(2, version, body=body)
    return resp.topics[0].partitions[0]


def test_list_offsets_special_timestamps_by_version(w: Wire) -> None:
    metadata(w, 12, ["lo-t"])
    batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(3)])
    assert w.call(0, 9, body=produce_body(9, "lo-t", {0: batch})) is not None
    for version, ts, expected in [(8, -4, 0), (10, -4, 0), (9, -5, -1), (10, -1, 3),
                                  (11, -6, -1)]:  # not tiered: no pending upload
        p = list_offsets(w, version, "lo-t", ts)
        assert (p.error_code, p.offset) == (0, expected), (version, ts)
    for version, ts in [(7, -4), (8, -5), (6, -3), (10, -6)]:
        p = list_offsets(w, version, "lo-t", ts)
        assert (p.error_code, p.offset) == (ErrorCode.UNSUPPORTED_VERSION, -1), (version, ts)
    assert list_offsets(w, 10, "lo-t", -5).leader_epoch == -1


def test_unknown_topic_id_metadata_is_unaffected(w: Wire) -> None:
    cls = request_class(3, 13)
    tcls = nested(cls, "topics")
    resp: Any = w.call(3, 13, body=make(cls, topics=(make(tcls, name=None,
                                                          topic_id=uuid.uuid4()),)))
    assert [t.error_code for t in resp.topics] == [ErrorCode.UNKNOWN_TOPIC_ID]
