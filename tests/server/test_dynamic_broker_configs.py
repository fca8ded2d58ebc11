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
