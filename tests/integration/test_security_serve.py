"""`tidelog serve` with a Kafka-style server.properties (PEM keystore and truststore files, a
PlainLoginModule JAAS text over continuation lines, StandardAuthorizer, super.users): a real
process that a librdkafka client reaches over SASL_SSL, the super user allowed and another
user refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import confluent_kafka
from security_support import Pki, librdkafka_conf
from serve_process import ServeProcess


def test_kafka_server_properties(tmp_path: Path) -> None:
    pki = Pki.create()
    props = tmp_path / "server.properties"
    props.write_text(
        "# as a Kafka broker's file\n"
        "listener.security.protocol.map=SASL_SSL:SASL_SSL\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.location={pki.keystore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={pki.ca_file}\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        "listener.name.sasl_ssl.plain.sasl.jaas.config="
        "org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
        '    username="admin" password="admin-secret" \\\n'
        '    user_admin="admin-secret" \\\n'
        '    user_alice="alice-secret";\n'
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:admin\n"
    )
    serve = ServeProcess(tmp_path / "logs", {"listeners": "SASL_SSL://127.0.0.1:0"},
                         ["-c", str(props)]).start()
    try:
        outcome: dict[str, list[Any]] = {}
        for user, password in (("admin", "admin-secret"), ("alice", "alice-secret")):
            p = confluent_kafka.Producer({
                "bootstrap.servers": serve.bootstrap_servers, "message.timeout.ms": 10000,
                **librdkafka_conf(pki, "SASL_SSL", "PLAIN", user, password)})
            errors: list[Any] = []
            p.produce("orders", b"x", on_delivery=lambda e, m, out=errors: out.append(e))
            p.flush(20)
            outcome[user] = errors
        assert outcome["admin"] == [None]
        assert [e.code() for e in outcome["alice"]] == [
            confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    finally:
        assert serve.stop() == 0
        pki.remove()
