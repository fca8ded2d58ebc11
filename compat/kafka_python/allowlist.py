"""kafka-python integration tests that do not pass against tidelog, each with its reason.
compat/FINDINGS.md explains every entry; tests/integration/test_compat_kafka_python.py checks
that the two agree."""

from __future__ import annotations

# Tests that cannot apply to one broker, or to a broker the suite did not start itself.
SKIP: dict[str, str] = {
    "test_describe_metadata_quorum":
        "needs a KRaft quorum (DescribeQuorum on __cluster_metadata); tidelog has no Raft log",
    "TestSSLConnection::test_ssl_handshake":
        "spawns its own Kafka JVM with an SSL listener from Kafka's templates",
    "TestSSLConnection::test_legacy_kafka_client_ssl":
        "spawns its own Kafka JVM with an SSL listener from Kafka's templates",
}

# Tests of what tidelog does not do yet: (reason, run?)
XFAIL: dict[str, tuple[str, bool]] = {}

# Tests that race inside kafka-python itself, whatever the broker (by test function, every
# parametrization): run again once when they fail, so a run fails only if the race strikes
# twice in a row, or the test fails for another reason.
RERUN: dict[str, str] = {
    "test_idempotent_producer_max_in_flight":
        "its consumer subscribes while its first Metadata request (no topics) is in flight; "
        "kafka-python 3.0.12 takes that answer as the one the subscription asked for and "
        "waits metadata.max.age.ms (5 min) for the next (the race KAFKA-7831 fixed in "
        "Kafka's Java client)",
    "test_kafka_consumer":
        "its consumer is made with its topic: the constructor's set_topics runs while the "
        "client's bootstrap Metadata request (no topics) may be in flight on the client's "
        "network thread, and that answer clears the update set_topics asked for, as above",
}

# Added to SKIP in the cluster run (run.py --brokers N): tests that assume the suite's
# one-broker fixture and cannot apply to three brokers, whatever the broker.
CLUSTER_SKIP: dict[str, str] = {
    "test_create_partitions":
        "assigns the new partitions to broker 0 alone (its fixture's only broker); on a cluster "
        "whose topics have three replicas Kafka refuses that assignment too",
    "test_delete_records":
        "expects one poll to return the records of six partitions, which a three-broker "
        "cluster's leaders answer in separate fetch responses",
}
