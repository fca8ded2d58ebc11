"""Seek (offset, timestamp), list offsets, topic and config admin, delete records through
each client's own API against a real ``tidelog serve``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from typing import Any

import pytest
from broker_clients import CLIENTS, consume, make_records, produce

N = 20


@pytest.fixture(scope="module")
def seeded(serve) -> tuple[str, list[Any]]:  # type: ignore[no-untyped-def]
    topic = "seek-topic"
    recs = make_records("seek", N, int(time.time() * 1000) - 100_000)
    produce("confluent", serve.bootstrap_servers, topic, recs[:10])
    produce("kafka-python", serve.bootstrap_servers, topic, recs[10:])
    return topic, recs


@pytest.mark.parametrize("client", CLIENTS)
def test_seek_to_offset(serve, seeded, client: str) -> None:  # type: ignore[no-untyped-def]
    topic, recs = seeded
    got = consume(client, serve.bootstrap_servers, topic, 5, start=7)
    assert [r.offset for r in got] == [7, 8, 9, 10, 11]
    assert [r.content() for r in got] == [r.content() for r in recs[7:12]]


@pytest.mark.parametrize("client", CLIENTS)
def test_seek_to_timestamp(serve, seeded, client: str) -> None:  # type: ignore[no-untyped-def]
    topic, recs = seeded
    got = consume(client, serve.bootstrap_servers, topic, 4, timestamp=recs[12].timestamp)
    assert [r.offset for r in got] == [12, 13, 14, 15]
    assert [r.content() for r in got] == [r.content() for r in recs[12:16]]


# -- list offsets -----------------------------------------------------------------------------
def _offsets_confluent(bs: str, topic: str, ts: int) -> tuple[int, int, int]:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, OffsetSpec

    a = AdminClient({"bootstrap.servers": bs})
    tp = ck.TopicPartition(topic, 0)
    out = []
    for spec in (OffsetSpec.earliest(), OffsetSpec.latest(), OffsetSpec.for_timestamp(ts)):
        out.append(a.list_offsets({tp: spec})[tp].result().offset)
    return out[0], out[1], out[2]


def _offsets_kafka_python(bs: str, topic: str, ts: int) -> tuple[int, int, int]:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bs)
    tp = kafka.TopicPartition(topic, 0)
    try:
        return (
            c.beginning_offsets([tp])[tp],
            c.end_offsets([tp])[tp],
            c.offsets_for_times({tp: ts})[tp].offset,
        )
    finally:
        c.close()


def _offsets_aiokafka(bs: str, topic: str, ts: int) -> tuple[int, int, int]:
    import aiokafka

    async def go() -> tuple[int, int, int]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs)
        await c.start()
        tp = aiokafka.TopicPartition(topic, 0)
        try:
            return (
                (await c.beginning_offsets([tp]))[tp],
                (await c.end_offsets([tp]))[tp],
                (await c.offsets_for_times({tp: ts}))[tp].offset,
            )
        finally:
            await c.stop()

    return asyncio.run(go())


def _offsets_kcat(bs: str, topic: str, ts: int) -> tuple[int, int, int]:
    out = []
    for t in (-2, -1, ts):
        res = subprocess.run(
            ["kcat", "-Q", "-b", bs, "-t", f"{topic}:0:{t}", "-J"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        doc = json.loads(res.stdout)
        out.append(int(doc[topic]["0"]["offset"]))
    return out[0], out[1], out[2]


OFFSETS = {
    "confluent": _offsets_confluent,
    "kafka-python": _offsets_kafka_python,
    "aiokafka": _offsets_aiokafka,
    "kcat": _offsets_kcat,
}


@pytest.mark.parametrize("client", CLIENTS)
def test_list_offsets_earliest_latest_by_time(serve, seeded, client: str) -> None:  # type: ignore[no-untyped-def]
    topic, recs = seeded
    assert OFFSETS[client](serve.bootstrap_servers, topic, recs[5].timestamp) == (0, N, 5)


# -- admin ------------------------------------------------------------------------------------
def _kcat_topics(bs: str) -> set[str]:
    res = subprocess.run(
        ["kcat", "-L", "-b", bs, "-J"], check=True, capture_output=True, timeout=60
    )
    return {t["topic"] for t in json.loads(res.stdout)["topics"]}


def _admin_confluent(bs: str, topic: str) -> dict[str, Any]:
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    a = AdminClient({"bootstrap.servers": bs})
    a.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])[topic].result()
    res = ConfigResource(ResourceType.TOPIC, topic)
    before = a.describe_configs([res])[res].result()
    res2 = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    a.incremental_alter_configs([res2])[res2].result()
    after = a.describe_configs([res])[res].result()
    produce("confluent", bs, topic, make_records("adm", 10, 1_700_000_000_000))
    tp = ck.TopicPartition(topic, 0, 4)
    low = a.delete_records([tp])[tp].result().low_watermark
    listed = set(a.list_topics(timeout=10).topics)
    a.delete_topics([topic])[topic].result()
    return {
        "retention": before["retention.ms"].value,
        "cleanup": after["cleanup.policy"].value,
        "low": low,
        "listed": topic in listed,
    }


def _admin_kafka_python(bs: str, topic: str) -> dict[str, Any]:
    import kafka
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})])

        def describe() -> dict[str, str]:
            resp = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            return {k: v["value"] for k, v in resp["topic"][topic].items()}

        before = describe()
        a.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    topic,
                    configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"},
                )
            ]
        )
        after = describe()
        produce("kafka-python", bs, topic, make_records("adm", 10, 1_700_000_000_000))
        tp = kafka.TopicPartition(topic, 0)
        low = a.delete_records({tp: 4})[tp]["low_watermark"]
        listed = topic in a.list_topics()
        a.delete_topics([topic])
    finally:
        a.close()
    return {
        "retention": before["retention.ms"],
        "cleanup": after["cleanup.policy"],
        "low": low,
        "listed": listed,
    }


def _admin_aiokafka(bs: str, topic: str) -> dict[str, Any]:
    import aiokafka
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    async def go() -> dict[str, Any]:
        a = AIOKafkaAdminClient(bootstrap_servers=bs)
        await a.start()
        try:
            await a.create_topics(
                [NewTopic(topic, 2, 1, topic_configs={"retention.ms": "3600000"})]
            )

            async def describe() -> dict[str, str]:
                resp = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
                entries = resp[0].resources[0][4]
                return {e[0]: e[1] for e in entries}

            before = await describe()
            await a.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC,
                        topic,
                        configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"},
                    )
                ]
            )
            after = await describe()
            await asyncio.to_thread(
                produce, "aiokafka", bs, topic, make_records("adm", 10, 1_700_000_000_000)
            )
            tp = aiokafka.TopicPartition(topic, 0)
            low = (await a.delete_records({tp: RecordsToDelete(4)}))[tp]
            listed = topic in await a.list_topics()
            await a.delete_topics([topic])
            return {
                "retention": before["retention.ms"],
                "cleanup": after["cleanup.policy"],
                "low": low,
                "listed": listed,
            }
        finally:
            await a.close()

    return asyncio.run(go())


ADMIN = {
    "confluent": _admin_confluent,
    "kafka-python": _admin_kafka_python,
    "aiokafka": _admin_aiokafka,
}


@pytest.mark.parametrize("client", sorted(ADMIN))
def test_admin_topics_configs_delete_records(serve, client: str) -> None:  # type: ignore[no-untyped-def]
    import re

    topic = f"admin-{client}"
    got = ADMIN[client](serve.bootstrap_servers, topic)
    low = got["low"]
    low = int(re.sub(r"\D", "", str(low))) if not isinstance(low, int) else low
    assert got == {"retention": "3600000", "cleanup": "compact,delete", "low": low, "listed": True}
    assert low == 4
    # another client sees the new log start offset, then the topic disappears (kcat metadata)
    assert topic not in _kcat_topics(serve.bootstrap_servers)


def test_kcat_sees_created_topic_and_records_after_delete_records(serve) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": serve.bootstrap_servers})
    a.create_topics([NewTopic("kcat-admin", 1, 1)])["kcat-admin"].result()
    assert "kcat-admin" in _kcat_topics(serve.bootstrap_servers)
    recs = make_records("kc", 6, 1_700_000_000_000)
    produce("kcat", serve.bootstrap_servers, "kcat-admin", recs)
    tp = TopicPartition("kcat-admin", 0, 2)
    assert a.delete_records([tp])[tp].result().low_watermark == 2
    got = consume("kcat", serve.bootstrap_servers, "kcat-admin", 4)
    assert [r.offset for r in got] == [2, 3, 4, 5]
    assert _offsets_kcat(serve.bootstrap_servers, "kcat-admin", 0)[0] == 2
