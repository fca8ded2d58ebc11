"""Admin APIs at the wire level: CreateTopics, DeleteTopics, CreatePartitions, configs,
DeleteRecords, Metadata topic ids, DescribeCluster."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, fetch_body, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker

TOPIC, BROKER = 2, 4


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"log.retention.hours": "5"}) as b:
        yield b


@pytest.fixture
def w(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker) as wire:
        yield wire


def create(
    w: Wire,
    name: str,
    partitions: int = 1,
    rf: int = 1,
    validate_only: bool = False,
    version: int = 7,
    **configs: str,
) -> Any:
    cls = request_class(19, version)
    tcls = nested(cls, "topics")
    ccls = nested(tcls, "configs")
    resp: Any = w.call(
        19,
        version,
        body=make(
            cls,
            timeout=10000,
            validate_only=validate_only,
            topics=(
                make(
                    tcls,
                    name=name,
                    num_partitions=partitions,
                    replication_factor=rf,
                    assignments=(),
                    configs=tuple(make(ccls, name=k, value=v) for k, v in configs.items()),
                ),
            ),
        ),
    )
    return resp.topics[0]


def metadata(w: Wire, *names: str, version: int = 12) -> dict[str, Any]:
    cls = request_class(3, version)
    tcls = nested(cls, "topics")
    topics = tuple(make(tcls, name=n, topic_id=uuid.UUID(int=0)) for n in names) if names else None
    resp: Any = w.call(
        3,
        version,
        body=make(
            cls,
            topics=topics,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    return {t.name: t for t in resp.topics}


def describe(w: Wire, rtype: int, name: str, version: int = 4) -> Any:
    cls = request_class(32, version)
    rcls = nested(cls, "resources")
    resp: Any = w.call(
        32,
        version,
        body=make(
            cls,
            include_synonyms=True,
            include_documentation=True,
            resources=(
                make(rcls, resource_type=rtype, resource_name=name, configuration_keys=None),
            ),
        ),
    )
    return resp.results[0]


def incremental(w: Wire, name: str, ops: list[tuple[str, int, str | None]]) -> Any:
    cls = request_class(44, 1)
    rcls = nested(cls, "resources")
    ccls = nested(rcls, "configs")
    resp: Any = w.call(
        44,
        1,
        body=make(
            cls,
            validate_only=False,
            resources=(
                make(
                    rcls,
                    resource_type=TOPIC,
                    resource_name=name,
                    configs=tuple(
                        make(ccls, name=n, config_operation=o, value=v) for n, o, v in ops
                    ),
                ),
            ),
        ),
    )
    return resp.responses[0]


def test_create_topic_errors_and_validate_only(w: Wire) -> None:
    assert create(w, "c1", 2).error_code == 0
    assert create(w, "c1", 2).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert create(w, "bad name!", 1).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert create(w, "c2", 0).error_code == ErrorCode.INVALID_PARTITIONS
    assert create(w, "c3", 1, rf=3).error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    bad = create(w, "c4", 1, **{"no.such.config": "1"})
    assert bad.error_code == ErrorCode.INVALID_CONFIG and "no.such.config" in bad.error_message
    assert create(w, "c5", 1, **{"retention.ms": "abc"}).error_code == ErrorCode.INVALID_CONFIG
    ok = create(w, "c6", 3, validate_only=True)
    assert (ok.error_code, ok.num_partitions) == (0, 3)
    assert "c6" not in metadata(w)
    dflt = create(w, "c7", -1, rf=-1)  # broker defaults
    assert (dflt.error_code, dflt.num_partitions, dflt.replication_factor) == (0, 1, 1)


@pytest.mark.parametrize("version", [0, 1, 4, 9, 10, 12])
def test_metadata_versions_and_stable_topic_ids(w: Wire, version: int) -> None:
    create(w, "meta", 2)
    first = metadata(w, "meta", version=version)["meta"]
    again = metadata(w, version=version)["meta"]
    assert first.error_code == 0 and len(first.partitions) == 2
    assert [p.leader_id for p in first.partitions] == [1, 1]
    if version >= 10:
        assert first.topic_id == again.topic_id != uuid.UUID(int=0)
    name = f"does-not-exist-v{version}"
    missing = metadata(w, name, version=version)[name]
    if version < 4:  # before v4 a Metadata request always auto-creates (broker default on)
        assert missing.error_code == 0 and len(missing.partitions) == 1
    else:  # allow_auto_topic_creation=false
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_and_recreate_gives_an_empty_topic_with_a_new_id(w: Wire) -> None:
    create(w, "dr", 1)
    old_id = metadata(w, "dr")["dr"].topic_id
    w.call(0, 9, body=produce_body(9, "dr", {0: build_batch([(1, None, b"x")])}))
    resp: Any = w.call(
        20,
        6,
        topics=(make(nested(request_class(20, 6), "topics"), name=None, topic_id=old_id),),
        timeout=10000,
    )
    assert (resp.responses[0].error_code, resp.responses[0].name) == (0, "dr")
    resp = w.call(20, 4, topic_names=("dr",), timeout=10000)
    assert resp.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    create(w, "dr", 1)
    assert metadata(w, "dr")["dr"].topic_id != old_id
    fetched: Any = w.call(1, 12, body=fetch_body(12, "dr", {0: 0}))
    assert fetched.responses[0].partitions[0].high_watermark == 0


def test_create_partitions(w: Wire) -> None:
    create(w, "cp", 2)
    cls = request_class(37, 3)
    tcls = nested(cls, "topics")

    def grow(name: str, count: int, validate_only: bool = False) -> Any:
        resp: Any = w.call(
            37,
            3,
            body=make(
                cls,
                timeout=10000,
                validate_only=validate_only,
                topics=(make(tcls, name=name, count=count, assignments=None),),
            ),
        )
        return resp.results[0]

    assert grow("cp", 1).error_code == ErrorCode.INVALID_PARTITIONS
    assert grow("cp", 5, validate_only=True).error_code == 0
    assert len(metadata(w, "cp")["cp"].partitions) == 2
    assert grow("cp", 5).error_code == 0
    assert len(metadata(w, "cp")["cp"].partitions) == 5
    assert grow("nope", 5).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_sources_and_synonyms(w: Wire) -> None:
    create(w, "dc", 1, **{"segment.bytes": "1048576"})
    res = describe(w, TOPIC, "dc")
    entries = {c.name: c for c in res.configs}
    assert res.error_code == 0
    assert (entries["segment.bytes"].value, entries["segment.bytes"].config_source) == (
        "1048576",
        1,
    )
    # Kafka's ConfigHelper lists a topic config's broker synonyms from its first one
    # (log.retention.ms): with only log.retention.hours set, retention.ms has the value but
    # no synonym, and its source is DEFAULT_CONFIG, as Kafka answers
    assert (entries["retention.ms"].value, entries["retention.ms"].config_source) == ("18000000", 5)
    assert list(entries["retention.ms"].synonyms) == []
    assert [(s.name, s.value, s.source) for s in entries["segment.bytes"].synonyms] == [
        ("segment.bytes", "1048576", 1), ("log.segment.bytes", "1073741824", 5)]
    assert [(s.name, s.value, s.source) for s in entries["compression.type"].synonyms] == [
        ("compression.type", "producer", 5)]
    assert list(entries["remote.storage.enable"].synonyms) == []
    assert (
        entries["cleanup.policy"].config_source == 5 and entries["cleanup.policy"].value == "delete"
    )
    assert entries["cleanup.policy"].documentation
    for v in (1, 2, 3):
        assert describe(w, TOPIC, "dc", version=v).error_code == 0
    assert describe(w, TOPIC, "missing").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    broker_res = describe(w, BROKER, "1")
    broker_entries = {c.name: c.value for c in broker_res.configs}
    assert broker_entries["log.retention.hours"] == "5" and broker_entries["node.id"] == "1"


def test_incremental_alter_configs(w: Wire) -> None:
    create(w, "iac", 1)
    assert incremental(w, "iac", [("cleanup.policy", 2, "compact")]).error_code == 0
    assert {c.name: c.value for c in describe(w, TOPIC, "iac").configs}[
        "cleanup.policy"
    ] == "delete,compact"
    assert incremental(w, "iac", [("cleanup.policy", 3, "delete")]).error_code == 0
    assert incremental(w, "iac", [("retention.ms", 0, "1000")]).error_code == 0
    conf = {c.name: c for c in describe(w, TOPIC, "iac").configs}
    assert conf["cleanup.policy"].value == "compact" and conf["retention.ms"].value == "1000"
    assert incremental(w, "iac", [("retention.ms", 1, None)]).error_code == 0
    conf = {c.name: c for c in describe(w, TOPIC, "iac").configs}
    # back to the broker's log.retention.hours (5): Kafka's source for it is DEFAULT_CONFIG
    # (see test_describe_configs_sources_and_synonyms)
    assert (conf["retention.ms"].value, conf["retention.ms"].config_source) == ("18000000", 5)
    # Kafka's prepareIncrementalConfigs: APPEND/SUBTRACT on a key that is not a list is an
    # InvalidRequestException named after the operation
    for op, verb in ((2, "append"), (3, "subtract")):
        r = incremental(w, "iac", [("retention.ms", op, "5")])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST, f"Config value {verb} is not allowed for config key: retention.ms")
    assert incremental(w, "iac", [("bogus", 0, "5")]).error_code == ErrorCode.INVALID_CONFIG
    assert (
        incremental(w, "nope", [("retention.ms", 0, "5")]).error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_delete_records(w: Wire) -> None:
    create(w, "delrec", 1)
    w.call(0, 9, body=produce_body(9, "delrec", {0: build_batch([(1, None, b"x")] * 5)}))
    cls = request_class(21, 2)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")

    def delete(offset: int) -> Any:
        resp: Any = w.call(
            21,
            2,
            body=make(
                cls,
                timeout=10000,
                topics=(
                    make(
                        tcls,
                        name="delrec",
                        partitions=(make(pcls, partition_index=0, offset=offset),),
                    ),
                ),
            ),
        )
        return resp.topics[0].partitions[0]

    assert delete(99).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    r = delete(3)
    assert (r.error_code, r.low_watermark) == (0, 3)
    r = delete(-1)  # -1 = up to the high watermark
    assert (r.error_code, r.low_watermark) == (0, 5)
    fetched: Any = w.call(1, 12, body=fetch_body(12, "delrec", {0: 0}))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_describe_cluster(w: Wire, broker: EmbeddedBroker) -> None:
    resp: Any = w.call(60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert resp.error_code == 0 and resp.controller_id == 1
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, broker.port)]
    assert resp.cluster_id == broker.broker.replica_manager.cluster_id
