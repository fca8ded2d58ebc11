"""The registry's store starts against a broker that does not know its cluster yet: a
cluster broker answers Metadata with no brokers and no topics until the controller's first
UpdateMetadata (librdkafka: _PARTIAL), and a registry started with its broker asks again
instead of failing the broker's start."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from tidelog.protocol.errors import ErrorCode
from tidelog.schema_registry.state import RegistryState
from tidelog.schema_registry.store import KafkaStore
from tidelog.testing import EmbeddedBroker, FaultPlan

METADATA = 3


def test_the_store_asks_again_while_metadata_names_no_broker() -> None:
    plan = FaultPlan()
    with EmbeddedBroker({}, fault_plan=plan) as broker:
        # the next Metadata answers carry no broker and no topic, as a cluster broker's
        # before its first UpdateMetadata
        plan.fail_requests(METADATA, ErrorCode.NONE, times=4)  # empty, no error
        store = KafkaStore(topic="_schemas", state=RegistryState(), timeout_ms=30_000,
                           client_config={"bootstrap.servers": broker.bootstrap_servers})
        store._ensure_topic(60)
        assert [f.kind for f in plan.injected].count("request") == 4  # each empty answer given
        topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
            timeout=30).topics
        assert "_schemas" in topics and topics["_schemas"].error is None
