"""Dynamic broker configs: AlterConfigs / IncrementalAlterConfigs on the BROKER resource
through confluent-kafka's AdminClient, applied live (message.max.bytes refuses a record it
allowed a moment before), described with Kafka's sources and synonyms, persisted across a
restart; keys Kafka cannot change dynamically are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire, request_class

from tidelog.protocol.kio_util import make, nested
from tidelog.server.dynamic_config import dynamic_config
from tidelog.testing import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
adm = pytest.importorskip("confluent_kafka.admin")


def _admin(b: EmbeddedBroker) -> Any:
    return adm.AdminClient({"bootstrap.servers": b.bootstrap_servers})


def _describe(a: Any, name: str) -> dict[str, Any]:
    res = adm.ConfigResource(adm.ResourceType.BROKER, name)
    return a.describe_configs([res])[res].result(timeout=30)


def _produce(b: EmbeddedBroker, topic: str, size: int) -> Any:
    errors: list[Any] = []
    p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "message.max.bytes": 1 << 20,
                     "retries": 0})
    p.produce(topic, b"x" * size, on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    return errors[0]


def test_alter_broker_config_live_and_persisted(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path), "log.retention.hours": "5"}) as b:
        node = str(b.broker.node_id)
        a = _admin(b)
        assert _produce(b, "dyn-t", 5000) is None
        res = adm.ConfigResource(adm.ResourceType.BROKER, node,
                                 set_config={"message.max.bytes": "2000"})
        a.alter_configs([res])[res].result(timeout=30)
        err = _produce(b, "dyn-t", 5000)
        assert err is not None and err.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
        entry = _describe(a, node)["message.max.bytes"]
        assert (entry.value, entry.source) == ("2000", adm.ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        static = _describe(a, node)["log.retention.hours"]
        assert static.source == adm.ConfigSource.STATIC_BROKER_CONFIG.value
        assert static.is_read_only is False
        assert _describe(a, node)["broker.id"].is_read_only is True
        # the cluster default (empty name, which confluent-kafka cannot name): raw request
        with Wire(b) as w:
            cls = request_class(44, 1)
            rcls = nested(cls, "resources")
            ccls = nested(rcls, "configs")
            resp: Any = w.call(44, 1, body=make(cls, validate_only=False, resources=(make(
                rcls, resource_type=4, resource_name="", configs=(make(
                    ccls, name="log.retention.ms", config_operation=0, value="60000"),)),)))
            assert resp.responses[0].error_code == 0
        assert _describe(a, node)["log.retention.ms"].source == \
            adm.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
        # a topic's retention.ms lists its broker synonyms layer by layer, as Kafka's
        # ConfigHelper.configSynonyms: dynamic default, static, then the default
        with Wire(b) as w:
            cls = request_class(32, 4)
            rcls = nested(cls, "resources")
            resp = w.call(32, 4, body=make(cls, include_synonyms=True,
                                           include_documentation=False, resources=(make(
                rcls, resource_type=2, resource_name="dyn-t",
                configuration_keys=("retention.ms",)),)))
            entry = resp.results[0].configs[0]
            assert (entry.value, entry.config_source) == ("60000", 3)
            assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
                ("log.retention.ms", "60000", 3), ("log.retention.hours", "5", 4),
                ("log.retention.hours", "168", 5)]
        # not dynamic in Kafka: refused
        bad = adm.ConfigResource(adm.ResourceType.BROKER, node,
                                 set_config={"log.dirs": "/elsewhere"})
        with pytest.raises(ck.KafkaException) as info:
            a.alter_configs([bad])[bad].result(timeout=30)
        assert info.value.args[0].code() == ck.KafkaError.INVALID_REQUEST
        b.restart()
        a = _admin(b)
        assert _describe(a, node)["message.max.bytes"].value == "2000"
        assert _describe(a, node)["log.retention.ms"].value == "60000"
        err = _produce(b, "dyn-t", 5000)
        assert err is not None and err.code() == ck.KafkaError.MSG_SIZE_TOO_LARGE


def test_a_key_that_is_no_broker_config_is_accepted_and_applies_to_nothing(
        tmp_path: Path) -> None:
    """Kafka's ZooKeeper mode refuses only the broker keys it cannot change dynamically
    (DynamicBrokerConfig.validateConfigs intersects with its nonDynamicProps): KafkaJS's
    own suite alters ``cleanup.policy`` (a topic config's name) on a broker and expects
    success. Stored, it changes no topic's cleanup.policy."""
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        node = str(b.broker.node_id)
        a = _admin(b)
        a.create_topics([adm.NewTopic("dyn-policy", 1, 1)])["dyn-policy"].result(timeout=30)
        res = adm.ConfigResource(adm.ResourceType.BROKER, node,
                                 set_config={"cleanup.policy": "compact"})
        a.alter_configs([res])[res].result(timeout=30)
        topic = adm.ConfigResource(adm.ResourceType.TOPIC, "dyn-policy")
        policy = a.describe_configs([topic])[topic].result(timeout=30)["cleanup.policy"]
        assert (policy.value, policy.source) == ("delete",
                                                 adm.ConfigSource.DEFAULT_CONFIG.value)
        assert b.broker.config.originals.get("cleanup.policy") is None
        # a broker key Kafka cannot change dynamically is still refused
        bad = adm.ConfigResource(adm.ResourceType.BROKER, node,
                                 set_config={"num.partitions": "3"})
        with pytest.raises(ck.KafkaException) as info:
            a.alter_configs([bad])[bad].result(timeout=30)
        assert info.value.args[0].code() == ck.KafkaError.INVALID_REQUEST


def test_incremental_set_of_a_key_that_is_no_broker_config_is_stored(tmp_path: Path) -> None:
    """IncrementalAlterConfigs as Kafka's prepareIncrementalConfigs: SET and DELETE take any
    name (librdkafka's 0081_admin sets ``sasl.kerberos.min.time.before.relogin``, a Kafka
    listener config tidelog has no use for, and expects NO_ERROR); APPEND needs a known list
    config."""
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        node = str(b.broker.node_id)
        a = _admin(b)

        def alter(op: Any, name: str, value: str) -> None:
            res = adm.ConfigResource(adm.ResourceType.BROKER, node, incremental_configs=[
                adm.ConfigEntry(name, value, incremental_operation=op)])
            a.incremental_alter_configs([res])[res].result(timeout=30)

        alter(adm.AlterConfigOpType.SET, "sasl.kerberos.min.time.before.relogin", "58000")
        assert dynamic_config(b.broker).entity(node) == {
            "sasl.kerberos.min.time.before.relogin": "58000"}
        alter(adm.AlterConfigOpType.DELETE, "sasl.kerberos.min.time.before.relogin", "")
        assert dynamic_config(b.broker).entity(node) == {}
        with pytest.raises(ck.KafkaException) as info:
            alter(adm.AlterConfigOpType.APPEND, "no.such.config", "x")
        assert info.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
        for op, verb in ((adm.AlterConfigOpType.APPEND, "append"),
                         (adm.AlterConfigOpType.SUBTRACT, "subtract")):
            with pytest.raises(ck.KafkaException) as info:  # not a list: the request is bad
                alter(op, "message.max.bytes", "1")
            err = info.value.args[0]
            assert (err.code(), err.str()) == (ck.KafkaError.INVALID_REQUEST,
                f"Config value {verb} is not allowed for config key: message.max.bytes")
        with pytest.raises(ck.KafkaException) as info:  # still refused: not dynamic in Kafka
            alter(adm.AlterConfigOpType.SET, "num.partitions", "3")
        assert info.value.args[0].code() == ck.KafkaError.INVALID_REQUEST


def test_incremental_append_and_subtract_start_from_the_value_in_force(tmp_path: Path) -> None:
    """APPEND to a list config the broker entity does not set starts from the value in force
    (here Kafka's default, ``delete``), so SUBTRACT of what was appended gives that value
    back (librdkafka's 0081_admin; an empty ``log.cleanup.policy`` left every topic on the
    defaults refusing DeleteRecords with POLICY_VIOLATION)."""
    with EmbeddedBroker({"log.dirs": str(tmp_path)}) as b:
        node = str(b.broker.node_id)
        a = _admin(b)

        def alter(op: Any, value: str) -> dict[str, str]:
            res = adm.ConfigResource(adm.ResourceType.BROKER, node, incremental_configs=[
                adm.ConfigEntry("log.cleanup.policy", value, incremental_operation=op)])
            a.incremental_alter_configs([res])[res].result(timeout=30)
            return dynamic_config(b.broker).entity(node)

        assert alter(adm.AlterConfigOpType.APPEND, "compact") == {
            "log.cleanup.policy": "delete,compact"}
        assert alter(adm.AlterConfigOpType.SUBTRACT, "compact") == {"log.cleanup.policy": "delete"}
        a.create_topics([adm.NewTopic("dyn-del", 1, 1)])["dyn-del"].result(timeout=30)
        _produce(b, "dyn-del", 10)
        tp = ck.TopicPartition("dyn-del", 0, 1)
        deleted = a.delete_records([tp])[tp].result(timeout=30)
        assert deleted.low_watermark == 1
