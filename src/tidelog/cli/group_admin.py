"""The group administration ``tidelog groups`` needs, on librdkafka (confluent-kafka's
AdminClient, plus a Consumer that reads one record to date the oldest unconsumed one), as
kafka-consumer-groups.sh runs on Kafka's Admin client.

The one request librdkafka's Python binding does not offer, OffsetDelete (the tool's
``--delete-offsets``), goes through tidelog's own protocol client.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tidelog.cli.client_config import CliError, client_config, make_client, timeout_s, wait

TIMEOUT_S = 30
# ConsumerGroupState to the state names Kafka's tool prints
_STATE_NAMES = {
    "UNKNOWN": "Unknown",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
    "STABLE": "Stable",
    "DEAD": "Dead",
    "EMPTY": "Empty",
}


@dataclass(frozen=True, order=True)
class TopicPartition:
    topic: str
    partition: int


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    partitions: list[TopicPartition]


@dataclass
class GroupInfo:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[Member]


def _result(future: Any, what: str) -> Any:
    from confluent_kafka import KafkaException

    try:
        return wait(future, TIMEOUT_S, what)
    except KafkaException as exc:
        err = exc.args[0]
        raise CliError(f"{what}: {err.name()}: {err.str()}") from None


class GroupAdmin:
    """``with GroupAdmin(args) as admin``: one AdminClient for the command's requests."""

    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka.admin import AdminClient

        self.args = args
        conf = client_config(args, {"allow.auto.create.topics": False}, {})
        self.admin = make_client(AdminClient, conf, timeout_s(args.timeout, "--timeout"))

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def list_groups(self) -> list[tuple[str, str, str]]:
        res = _result(self.admin.list_consumer_groups(request_timeout=TIMEOUT_S), "ListGroups")
        return sorted(
            (g.group_id, _STATE_NAMES.get(g.state.name, g.state.name), "")
            for g in res.valid
        )

    def describe_group(self, group: str) -> GroupInfo:
        [f] = self.admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S).values()
        d = _result(f, f"DescribeGroups {group}")
        members = [
            Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.host,
                [TopicPartition(tp.topic, tp.partition) for tp in m.assignment.topic_partitions],
            )
            for m in d.members
        ]
        state = _STATE_NAMES.get(d.state.name, d.state.name)
        kind = "" if state == "Dead" else ("" if d.is_simple_consumer_group else "consumer")
        return GroupInfo(group, state, kind, d.partition_assignor or "", members)

    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        req = [ConsumerGroupTopicPartitions(group)]
        [f] = self.admin.list_consumer_group_offsets(req, request_timeout=TIMEOUT_S).values()
        res = _result(f, f"OffsetFetch {group}")
        return {
            TopicPartition(tp.topic, tp.partition): tp.offset
            for tp in res.topic_partitions
            if tp.offset >= 0 and tp.error is None
        }

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as CkTP

        tps = [CkTP(tp.topic, tp.partition, o) for tp, o in sorted(offsets.items())]
        req = [ConsumerGroupTopicPartitions(group, tps)]
        [f] = self.admin.alter_consumer_group_offsets(req, request_timeout=TIMEOUT_S).values()
        res = _result(f, f"OffsetCommit {group}")
        for tp in res.topic_partitions:
            if tp.error is not None:
                raise CliError(f"OffsetCommit {group} {tp.topic}-{tp.partition}: {tp.error.str()}")

    def partitions_for(self, topic: str) -> list[int]:
        md = self.admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            raise CliError(f"Topic '{topic}' does not exist")
        return sorted(md.partitions)

    def _list_offsets(self, specs: dict[TopicPartition, Any]) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as CkTP

        if not specs:
            return {}
        from tidelog.cli.progress import Progress

        req = {CkTP(tp.topic, tp.partition): spec for tp, spec in specs.items()}
        out: dict[TopicPartition, int] = {}
        futures = self.admin.list_offsets(req, request_timeout=TIMEOUT_S)
        # a reset over many partitions waits here: show how many are answered
        with Progress("Looking up offsets", len(futures), unit="partitions") as progress:
            for i, (ck_tp, f) in enumerate(futures.items()):
                progress.update(i)
                tp = TopicPartition(ck_tp.topic, ck_tp.partition)
                out[tp] = _result(f, "ListOffsets").offset
        return out

    def earliest_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets(dict.fromkeys(tps, OffsetSpec.earliest()))

    def latest_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets(dict.fromkeys(tps, OffsetSpec.latest()))

    def offsets_for_times(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Offset of the first record at or after each timestamp; -1 where there is none."""
        from confluent_kafka.admin import OffsetSpec

        return self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in wanted.items()})

    def first_timestamps(self, starts: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Timestamp of the record at each start offset (a throwaway consumer, no group)."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as CkTP

        if not starts:
            return {}
        conf = client_config(
            self.args,
            {"group.id": f"groups-lag-{random.randrange(100000)}", "enable.auto.commit": False},
            {},
        )
        consumer = make_client(Consumer, conf, reach_s=None)  # the admin reached the cluster
        try:
            consumer.assign([CkTP(tp.topic, tp.partition, o) for tp, o in starts.items()])
            return self._first_records(consumer, set(starts))
        finally:
            consumer.close()

    @staticmethod
    def _first_records(consumer: Any, wanted: set[TopicPartition]) -> dict[TopicPartition, int]:
        from confluent_kafka import TopicPartition as CkTP

        out: dict[TopicPartition, int] = {}
        polls = 0
        while wanted - set(out) and polls < 50:  # up to ~10 s for slow partitions
            polls += 1
            for m in consumer.consume(len(wanted), 0.2):
                tp = TopicPartition(m.topic(), m.partition())
                if m.error() is None and tp not in out:
                    out[tp] = m.timestamp()[1]
                    consumer.pause([CkTP(tp.topic, tp.partition)])  # one record is enough
        return out

    def delete_groups(self, groups: list[str]) -> list[tuple[str, str | None]]:
        """(group, error name or None) per group."""
        from confluent_kafka import KafkaException

        out: list[tuple[str, str | None]] = []
        futures = self.admin.delete_consumer_groups(groups, request_timeout=TIMEOUT_S)
        for group, f in futures.items():
            try:
                wait(f, TIMEOUT_S, "DeleteGroups")
                out.append((group, None))
            except KafkaException as exc:
                out.append((group, exc.args[0].name()))
        return out
