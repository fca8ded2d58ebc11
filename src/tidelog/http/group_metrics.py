"""``/metrics`` for every kind of group: Kafka's group-coordinator-metrics counts (groups
per protocol, consumer groups per state), and per group its type, state, members and
assignment sizes; per share-partition its offsets, in-flight records by state and the age of
its oldest acquisition lock. Kafka has no per-group series, hence ``tidelog_`` names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidelog.server.coordinator.group.consumer.group import ConsumerGroupState

from .group_views import CLASSIC, CONSUMER, SHARE, group_views, share_partition_views

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

SHARE_FIELDS = (
    ("start_offset", "tidelog_share_partition_start_offset",
     "Share-partition start offset (SPSO): every record before it is acknowledged or archived"),
    ("end_offset", "tidelog_share_partition_end_offset",
     "Share-partition end offset (SPEO): no record from it on was delivered yet"),
    ("in_flight", "tidelog_share_partition_in_flight_records",
     "Records between SPSO and SPEO still to be acknowledged (available or acquired)"),
    ("acquired", "tidelog_share_partition_acquired_records",
     "Records held by a member under an acquisition lock"),
    ("available", "tidelog_share_partition_available_records",
     "Records between SPSO and SPEO offered again (released, or their lock ran out)"),
    ("acknowledged", "tidelog_share_partition_acknowledged_records",
     "Acknowledged records between SPSO and SPEO"),
    ("archived", "tidelog_share_partition_archived_records",
     "Archived records between SPSO and SPEO (rejected, or past the delivery count limit)"),
)


class GroupCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        views = group_views(self.broker)
        yield from self._coordinator_counts([(v.type, v.state) for v in views])
        info = GaugeMetricFamily("tidelog_group_state",
                                 "1 for each group, labelled with its type (classic, consumer, "
                                 "share) and state", labels=["group", "type", "state"])  # fmt: skip
        members = GaugeMetricFamily("tidelog_group_members", "Members of the group",
                                    labels=["group", "type"])  # fmt: skip
        epoch = GaugeMetricFamily("tidelog_group_epoch",
                                  "Classic: the generation; consumer and share: the group epoch",
                                  labels=["group", "type"])  # fmt: skip
        assigned = GaugeMetricFamily(
            "tidelog_group_member_assigned_partitions",
            "Partitions assigned to the member (a share group's members share them)",
            labels=["group", "type", "member_id", "client_id"])
        for v in views:
            info.add_metric([v.group_id, v.type, v.state], 1)
            members.add_metric([v.group_id, v.type], len(v.members))
            epoch.add_metric([v.group_id, v.type], v.epoch)
            for m in v.members:
                assigned.add_metric([v.group_id, v.type, m.member_id, m.client_id],
                                    len(m.partitions))
        yield from (info, members, epoch, assigned)
        yield from self._share_partitions()

    def _coordinator_counts(self, groups: list[tuple[str, str]]) -> Iterator[Metric]:
        count = GaugeMetricFamily("kafka_server_group_coordinator_metrics_group_count",
                                  "group-coordinator-metrics group-count: groups per protocol",
                                  labels=["protocol"])  # fmt: skip
        for protocol in (CLASSIC, CONSUMER, SHARE):
            count.add_metric([protocol], sum(1 for t, _ in groups if t == protocol))
        yield count
        by_state = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_consumer_group_count",
            "group-coordinator-metrics consumer-group-count: consumer groups per state",
            labels=["state"])
        for state in ConsumerGroupState:
            n = sum(1 for t, s in groups if t == CONSUMER and s == state.value)
            by_state.add_metric([state.value.lower()], n)
        yield by_state

    def _share_partitions(self) -> Iterator[Metric]:
        labels = ["group", "topic", "partition"]
        fams = {attr: GaugeMetricFamily(name, doc, labels=labels)
                for attr, name, doc in SHARE_FIELDS}
        oldest = GaugeMetricFamily(
            "tidelog_share_partition_oldest_lock_age_seconds",
            "How long the longest-held acquisition lock has been held (0: none held)",
            labels=labels)
        for v in share_partition_views(self.broker):
            lv = [v.group_id, v.topic, str(v.partition)]
            values = asdict(v)
            for attr, fam in fams.items():
                fam.add_metric(lv, values[attr])
            oldest.add_metric(lv, v.oldest_lock_age_ms / 1000)
        yield from fams.values()
        yield oldest
