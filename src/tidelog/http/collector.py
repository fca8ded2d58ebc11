"""``/metrics``: a prometheus_client collector that reads the broker when scraped.

Names are what the Prometheus JMX exporter's usual Kafka rules make of Kafka's MBeans
(lowercased, ``PerSec`` meters as ``_total`` counters, histograms as summaries with
``quantile`` labels), so Kafka dashboards work unchanged; docs/metrics.md has the table.
Nothing is pushed per request: counters are the plain totals the hot path keeps
(tidelog.metrics), gauges are read from the logs, groups and cleaner here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidelog.metrics import LOG_FLUSH_STATS, LatencyHistogram
from tidelog.metrics.isr import ISR_CHANGE_STATS
from tidelog.metrics.loop_lag import LOOP_LAG
from tidelog.metrics.remote import GAUGES as REMOTE_GAUGES
from tidelog.metrics.remote import METERS as REMOTE_METERS
from tidelog.metrics.requests import STAGE_NAMES
from tidelog.server.replication.metrics import replication_gauges

from . import state

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

# (metric suffix, TopicStats attribute, Kafka meter name)
TOPIC_METERS = (
    ("messagesin", "messages_in", "MessagesInPerSec"),
    ("bytesin", "bytes_in", "BytesInPerSec"),
    ("bytesout", "bytes_out", "BytesOutPerSec"),
    ("totalproducerequests", "total_produce_requests", "TotalProduceRequestsPerSec"),
    ("failedproducerequests", "failed_produce_requests", "FailedProduceRequestsPerSec"),
    ("totalfetchrequests", "total_fetch_requests", "TotalFetchRequestsPerSec"),
    ("failedfetchrequests", "failed_fetch_requests", "FailedFetchRequestsPerSec"),
)


def summary(name: str, doc: str, series: Iterable[tuple[dict[str, str], LatencyHistogram]]) -> (
    Metric
):
    """A Yammer histogram as the JMX exporter shows it: quantile gauges plus _count/_sum."""
    m = Metric(name, doc, "summary")
    for labels, h in series:
        for q, value in h.quantiles():
            m.add_sample(name, {**labels, "quantile": q}, value)
        m.add_sample(name + "_count", labels, h.count)
        m.add_sample(name + "_sum", labels, h.sum_ms)
    return m


def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_metrics()
        yield from self._request_metrics()
        yield from self._purgatory()
        yield summary(
            "kafka_log_logflushstats_logflushrateandtimems",
            "LogFlushStats LogFlushRateAndTimeMs: time of log flushes (ms)",
            [({}, LOG_FLUSH_STATS.snapshot())],
        )
        yield summary(
            "tidelog_eventloop_lag_ms",
            "How late the broker's event loop woke a timer due every 10 ms (ms)",
            [({}, LOOP_LAG)],
        )
        yield from self._logs()
        yield from self._log_dirs_and_partitions()
        yield from self._free_space()
        yield from self._cleaner()
        yield from self._lag()
        yield from self._connections()
        yield from self._fetch_sessions()
        yield from self._remote_storage()

    # -- BrokerTopicMetrics -----------------------------------------------------------------
    def _topic_metrics(self) -> Iterator[Metric]:
        stats = self.broker.replica_manager.topic_stats
        if stats is None:
            return
        totals = stats.all_topics.as_dict()
        topics = {name: t.as_dict() for name, t in stats.topics().items()}
        for suffix, attr, meter in TOPIC_METERS:
            fam = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{suffix}",
                f"BrokerTopicMetrics {meter} (Count); no topic label: all topics",
                labels=["topic"],
            )
            fam.add_sample(fam.name + "_total", {}, totals[attr])
            for topic, t in sorted(topics.items()):
                fam.add_metric([topic], t[attr])
            yield fam
        yield CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                  "BrokerTopicMetrics ReplicationBytesOutPerSec (Count): record "
                                  "bytes sent to followers", value=stats.replication_bytes_out)

    # -- RequestMetrics ---------------------------------------------------------------------
    def _request_metrics(self) -> Iterator[Metric]:
        rm = self.broker.request_metrics
        if rm is None:
            return
        by_name = dict(rm.by_name)
        rate = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "RequestMetrics RequestsPerSec (Count) per request and version",
            labels=["request", "version"],
        )
        for name, s in sorted(by_name.items()):
            for version, n in sorted(s.requests.items()):
                rate.add_metric([name, str(version)], n)
        yield rate
        for stage, kafka_name in STAGE_NAMES.items():
            yield summary(
                f"kafka_network_requestmetrics_{kafka_name.lower()}",
                f"RequestMetrics {kafka_name} per request (ms)",
                [({"request": name}, s.stages[stage]) for name, s in sorted(by_name.items())],
            )

    def _purgatory(self) -> Iterator[Metric]:
        size = len(self.broker.purgatory)
        for metric, kafka in (("purgatorysize", "PurgatorySize"),
                              ("numdelayedoperations", "NumDelayedOperations")):  # fmt: skip
            fam = GaugeMetricFamily(
                f"kafka_server_delayedoperationpurgatory_{metric}",
                f"DelayedOperationPurgatory {kafka} (a single node completes acks=all "
                "produces at once: Produce is always 0)",
                labels=["delayedOperation"],
            )
            fam.add_metric(["Fetch"], size)
            fam.add_metric(["Produce"], 0)
            yield fam

    # -- logs -------------------------------------------------------------------------------
    def _logs(self) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        fams = {
            "size": GaugeMetricFamily("kafka_log_log_size", "Log Size (bytes)", labels=labels),
            "segments": GaugeMetricFamily(
                "kafka_log_log_numlogsegments", "Log NumLogSegments", labels=labels
            ),
            "leo": GaugeMetricFamily(
                "kafka_log_log_logendoffset", "Log LogEndOffset", labels=labels
            ),
            "lso": GaugeMetricFamily(
                "kafka_log_log_logstartoffset", "Log LogStartOffset", labels=labels
            ),
            "lsolag": GaugeMetricFamily(
                "kafka_cluster_partition_laststableoffsetlag",
                "Partition LastStableOffsetLag (HW - LSO)",
                labels=labels,
            ),
        }
        producers = 0
        for tp, lg in state.iter_logs(self.broker):
            lv = [tp.topic, str(tp.partition)]
            fams["size"].add_metric(lv, lg.size_in_bytes)
            fams["segments"].add_metric(lv, lg.number_of_segments())
            fams["leo"].add_metric(lv, lg.log_end_offset)
            fams["lso"].add_metric(lv, lg.log_start_offset)
            fams["lsolag"].add_metric(lv, lg.high_watermark - lg.last_stable_offset)
            producers += len(lg.producer_state.producers)
        yield from fams.values()
        yield gauge(
            "kafka_server_replicamanager_produceridcount",
            "ReplicaManager ProducerIdCount: producer ids with state in any partition",
            producers,
        )

    def _log_dirs_and_partitions(self) -> Iterator[Metric]:
        """Partitions, replication, controller and log-dir meters, in Kafka's groups."""
        rm = self.broker.replica_manager
        offline_parts = state.offline_partitions(self.broker)
        partitions = sum(t.partitions for t in rm.topics())
        yield from self._replica_manager_gauges(partitions, len(offline_parts))
        yield from self._replica_fetcher_gauges()
        yield gauge("kafka_server_replicamanager_offlinereplicacount",
                    "ReplicaManager OfflineReplicaCount", len(offline_parts))  # fmt: skip
        yield from self._controller_gauges(partitions, len(offline_parts))
        yield from self._log_dir_gauges()

    def _replica_manager_gauges(self, partitions: int, offline: int) -> Iterator[Metric]:
        """ReplicaManager's partition, leader, ISR-health and ISR-change meters."""
        rm = self.broker.replica_manager
        yield gauge("kafka_server_replicamanager_partitioncount",
                    "ReplicaManager PartitionCount", partitions)  # fmt: skip
        yield gauge("kafka_server_replicamanager_leadercount",
                    "ReplicaManager LeaderCount", partitions - offline)  # fmt: skip
        repl = replication_gauges(rm.partitions.values())
        yield gauge("kafka_server_replicamanager_underreplicatedpartitions",
                    "ReplicaManager UnderReplicatedPartitions: led here, ISR below the "
                    "assignment", repl.under_replicated)  # fmt: skip
        yield gauge("kafka_server_replicamanager_underminisrpartitioncount",
                    "ReplicaManager UnderMinIsrPartitionCount", repl.under_min_isr)  # fmt: skip
        yield gauge("kafka_server_replicamanager_atminisrpartitioncount",
                    "ReplicaManager AtMinIsrPartitionCount", repl.at_min_isr)  # fmt: skip
        isr = CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "ReplicaManager IsrShrinksPerSec (committed ISR shrinks)")
        isr.add_metric([], ISR_CHANGE_STATS.shrinks)
        yield isr
        isr = CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "ReplicaManager IsrExpandsPerSec (committed ISR expansions)")
        isr.add_metric([], ISR_CHANGE_STATS.expands)
        yield isr

    def _replica_fetcher_gauges(self) -> Iterator[Metric]:
        """The follower fetchers' MaxLag and the replication throttles' byte rates."""
        replication = self.broker.replication
        lag = replication.fetcher_manager.max_lag() if replication is not None else 0
        yield gauge("kafka_server_replicafetchermanager_maxlag",
                    "ReplicaFetcherManager MaxLag (clientId=Replica): messages the most "
                    "lagging followed partition is behind its leader's high watermark",
                    lag)  # fmt: skip
        quotas = replication.quotas if replication is not None else None
        for side, quota in (("leader", quotas.leader if quotas else None),
                            ("follower", quotas.follower if quotas else None)):  # fmt: skip
            yield gauge(f"kafka_server_{side}replication_byte_rate",
                        f"{side.capitalize()}Replication byte-rate: bytes/s of throttled "
                        "replicas (replication.quota.window.num samples)",
                        quota.byte_rate() if quota is not None else 0.0)  # fmt: skip

    def _controller_gauges(self, partitions: int, offline: int) -> Iterator[Metric]:
        """KafkaController's and ControllerStats' meters, this broker's own when alone."""
        # one broker is its own controller; in a cluster only the active one counts (Kafka)
        rm = self.broker.replica_manager
        active, topics, global_parts = 1, len(rm.topics()), partitions
        cluster = self.broker.cluster
        if cluster is not None:
            c = cluster.controller
            active, offline = c.active_controller_count, c.offline_partitions_count
            topics, global_parts = c.global_topic_count, c.global_partition_count
        unclean = CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                                      "ControllerStats UncleanLeaderElectionsPerSec (a total: "
                                      "leaders elected from outside the ISR)")
        unclean.add_metric([], cluster.controller.unclean_leader_elections if cluster else 0)
        yield unclean
        yield gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                    "KafkaController OfflinePartitionsCount", offline)  # fmt: skip
        yield gauge("kafka_controller_kafkacontroller_activecontrollercount",
                    "KafkaController ActiveControllerCount", active)  # fmt: skip
        yield gauge("kafka_controller_kafkacontroller_globaltopiccount",
                    "KafkaController GlobalTopicCount", topics)  # fmt: skip
        yield gauge("kafka_controller_kafkacontroller_globalpartitioncount",
                    "KafkaController GlobalPartitionCount", global_parts)  # fmt: skip

    def _log_dir_gauges(self) -> Iterator[Metric]:
        """LogManager's offline log directories: the count and one 0/1 gauge per dir."""
        offline_dirs = state.offline_log_dirs(self.broker)
        yield gauge("kafka_log_logmanager_offlinelogdirectorycount",
                    "LogManager OfflineLogDirectoryCount", len(offline_dirs))  # fmt: skip
        per_dir = GaugeMetricFamily(
            "kafka_log_logmanager_logdirectoryoffline",
            "LogManager LogDirectoryOffline (1: offline)",
            labels=["logDirectory"],
        )
        for d in state.all_log_dirs(self.broker):
            per_dir.add_metric([d], 1 if d in offline_dirs else 0)
        yield per_dir

    def _free_space(self) -> Iterator[Metric]:
        """The free-space floor (log.dir.min.free.bytes): not Kafka's, so tidelog_ names."""
        spaces = state.free_space(self.broker)
        families = {
            "free": GaugeMetricFamily("tidelog_log_dir_free_bytes",
                                      "Free bytes of a log dir at its last measure",
                                      labels=["logDirectory"]),
            "floor": GaugeMetricFamily("tidelog_log_dir_min_free_bytes",
                                       "The log dir's free-space floor (log.dir.min.free.bytes)",
                                       labels=["logDirectory"]),
            "below": GaugeMetricFamily("tidelog_log_dir_below_min_free",
                                       "1: the log dir is below its floor and refuses produces",
                                       labels=["logDirectory"]),
        }  # fmt: skip
        for d in spaces:
            families["free"].add_metric([str(d.path)], d.free)
            families["floor"].add_metric([str(d.path)], d.floor)
            families["below"].add_metric([str(d.path)], 1 if d.below_floor else 0)
        yield from families.values()
        yield gauge("tidelog_broker_degraded",
                    "1: a log dir is below its free-space floor (writes refused, reads served)",
                    1 if any(d.below_floor for d in spaces) else 0)  # fmt: skip

    # -- cleaner ----------------------------------------------------------------------------
    def _cleaner(self) -> Iterator[Metric]:
        c = state.cleaner(self.broker)
        if c is None:
            return
        m = c.manager
        stats = list(c.last_stats.values())
        now = self.broker.clock.milliseconds()
        yield gauge("kafka_log_logcleanermanager_max_dirty_percent",
                    "LogCleanerManager max-dirty-percent",
                    100 * float(m.dirtiest_log_cleanable_ratio))  # fmt: skip
        last_run = int(m.time_of_last_run)
        yield gauge("kafka_log_logcleanermanager_time_since_last_run_ms",
                    "LogCleanerManager time-since-last-run-ms",
                    max(0, now - last_run) if last_run else 0)  # fmt: skip
        yield gauge("kafka_log_logcleaner_max_buffer_utilization_percent",
                    "LogCleaner max-buffer-utilization-percent (last clean of each log)",
                    max((100 * s.buffer_utilization for s in stats), default=0.0))  # fmt: skip
        recopy = [100 * s.bytes_written / s.bytes_read for s in stats if s.bytes_read]
        yield gauge("kafka_log_logcleaner_cleaner_recopy_percent",
                    "LogCleaner cleaner-recopy-percent (last clean of each log, max)",
                    max(recopy, default=0.0))  # fmt: skip
        times = [s.elapsed_secs for s in stats]
        yield gauge("kafka_log_logcleaner_max_clean_time_secs",
                    "LogCleaner max-clean-time-secs", max(times, default=0.0))  # fmt: skip
        unclean = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "LogCleanerManager uncleanable-partitions-count",
            labels=["logDirectory"],
        )
        uncleanable = dict(m.uncleanable)
        for d in state.all_log_dirs(self.broker):
            unclean.add_metric([d], len(uncleanable.get(Path(d), set())))
        yield unclean

    # -- consumer groups --------------------------------------------------------------------
    def _lag(self) -> Iterator[Metric]:
        labels = ["consumergroup", "topic", "partition"]
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Consumer group lag in messages (HW - committed)", labels=labels)  # fmt: skip
        cur = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Consumer group committed offset", labels=labels)  # fmt: skip
        secs = GaugeMetricFamily(
            "kafka_consumergroup_group_lag_seconds",
            "Consumer group time lag: age of the first unconsumed record (s)",
            labels=["group", "topic", "partition"],
        )
        members = GaugeMetricFamily("kafka_consumergroup_members", "Consumer group members",
                                    labels=["consumergroup"])  # fmt: skip
        for pl in state.group_lags(self.broker):
            lv = [pl.group, pl.topic, str(pl.partition)]
            lag.add_metric(lv, pl.lag)
            cur.add_metric(lv, pl.committed)
            secs.add_metric(lv, pl.lag_ms / 1000)
        for gid, g in sorted(state.groups(self.broker).items()):
            members.add_metric([gid], len(g.members))
        yield from (lag, cur, secs, members)

    def _connections(self) -> Iterator[Metric]:
        fam = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "socket-server-metrics connection-count per listener",
            labels=["listener", "networkProcessor"],
        )
        counts = dict.fromkeys(listener_names(self.broker), 0)
        for conn in list(self.broker.connections):
            name = conn.listener.name or self.broker.config.listener.name
            counts[name] = counts.get(name, 0) + 1
        for name, n in sorted(counts.items()):
            fam.add_metric([name, "0"], n)
        yield fam

    def _fetch_sessions(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache gauges and evictions, and the partitions fetch requests
        named and were answered (an idle incremental session names and answers none)."""
        cache = self.broker.fetch_sessions
        follower, consumer = asdict(cache.stats.follower), asdict(cache.stats.consumer)
        yield gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                    "FetchSessionCache NumIncrementalFetchSessions", len(cache))  # fmt: skip
        yield gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                    "FetchSessionCache NumIncrementalFetchPartitionsCached",
                    cache.total_partitions)  # fmt: skip
        yield CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "FetchSessionCache IncrementalFetchSessionEvictionsPerSec (Count)",
            value=cache.stats.evictions,
        )
        for name in ("requests", "partitions_requested", "partitions_answered"):
            fam = CounterMetricFamily(f"tidelog_fetch_{name}",
                                      f"Fetch requests' {name.replace('_', ' ')}",
                                      labels=["fetcher"])  # fmt: skip
            fam.add_metric(["follower"], follower[name])
            fam.add_metric(["consumer"], consumer[name])
            yield fam

    def _remote_storage(self) -> Iterator[Metric]:
        """KIP-405/KIP-958 remote BrokerTopicMetrics, when tiered storage is on."""
        rlm = getattr(self.broker, "remote_log_manager", None)
        if rlm is None:
            return
        ready = GaugeMetricFamily(
            "tidelog_remote_log_metadata_topic_ready",
            "1 once __remote_log_metadata exists; 0 while tiered storage waits for it "
            "(the broker's log says why)")
        ready.add_metric([], 1 if rlm.rlmm.ready() else 0)
        yield ready
        metrics = rlm.metrics
        topics = metrics.topics()
        for attr, meter in REMOTE_METERS:
            fam = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{meter.removesuffix('PerSec').lower()}",
                f"BrokerTopicMetrics {meter} (Count); no topic label: all topics",
                labels=["topic"])
            fam.add_sample(fam.name + "_total", {}, getattr(metrics.all_topics, attr))
            for topic, t in sorted(topics.items()):
                fam.add_metric([topic], getattr(t, attr))
            yield fam
        for attr, name in REMOTE_GAUGES:
            g = GaugeMetricFamily(f"kafka_server_brokertopicmetrics_{name.lower()}",
                                  f"BrokerTopicMetrics {name} (summed over partitions)",
                                  labels=["topic"])
            for topic in sorted({t for t, _p in metrics.gauges[attr]}):
                g.add_metric([topic], metrics.topic_gauge(attr, topic))
            yield g


def listener_names(broker: Broker) -> list[str]:
    names = [broker.config.listener.name]
    names += [n for n in broker.listener_security if n not in names]
    return names
