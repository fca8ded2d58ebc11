"""Run KafkaJS's own test suite against three ``tidelog serve`` brokers and ZooKeeper.

    python compat/kafkajs/run.py --tests DIR [jest args]

``DIR`` is a checkout of github.com/tulios/kafkajs at the tag of the release users install
(``git archive v2.2.4``) with its dev dependencies installed (``npm install
--ignore-scripts``): the npm package ships no tests, so no test of the default command runs
this suite. KafkaJS's suite runs against the three brokers of its docker-compose file
(``docker-compose.2_4.yml``): ids 0, 1 and 2, each with a PLAINTEXT, an SSL and a SASL_SSL
listener on ``localhost`` (ports 9092-9094, 9095-9097, 9098-9100), two partitions and two
replicas per new topic, no initial rebalance delay, SASL PLAIN users from its JAAS file, a
SCRAM-SHA-256/512 user (made here as its ``createScramCredentials.sh`` makes it, with
AlterUserScramCredentials), ACLs with ``allow.everyone.if.no.acl.found``. The brokers here
have those settings on those ports (so the ports must be free) and a TLS certificate made for
the run (KafkaJS's clients do not verify it). OAUTHBEARER and the docker commands of a few
helpers (``addPartitions``) are not provided: compat/FINDINGS.md lists the tests that use them.

``localhost`` is resolved IPv4 first (``NODE_OPTIONS=--dns-result-order=ipv4first``): the
brokers listen on 127.0.0.1 only. SIGTERM stops the brokers and ZooKeeper.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tidelog.testing import EmbeddedCluster

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "kafka_python"))

import run as kafka_python_run  # compat/kafka_python/run.py

# KafkaJS's plainTextBrokers(), sslBrokers() and saslBrokers(): broker id -> first port
PORTS = {0: 9092, 1: 9095, 2: 9098}
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")  # on the first port, the next and the one after
PLAIN_USERS = {"test": "testtest", "bob": "bobbob", "alice": "alicealice"}  # server-jaas.conf
SCRAM_USER = ("testscram", {"SCRAM-SHA-256": "testtestscram=256",  # createScramCredentials.sh
                            "SCRAM-SHA-512": "testtestscram=512"})
SETTINGS = {  # docker-compose.2_4.yml's KAFKA_* settings that apply
    "num.partitions": "2",
    "default.replication.factor": "2",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "inter.broker.listener.name": "PLAINTEXT",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
KAFKA_VERSION = "2.4"  # the compose file the suite's CI runs by default


def plain_jaas() -> str:
    users = " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items())
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="test" password="testtest" {users};')


class KafkaJSCluster(EmbeddedCluster):
    """KafkaJS's three brokers: ids 0-2, each with its three listeners on its ports; the TLS
    certificate is made for this run (KafkaJS's clients do not verify it)."""

    def __init__(self, keystore: Path) -> None:
        super().__init__(brokers=3, config=SETTINGS, first_broker_id=0)
        self.keystore = keystore

    def broker_props(self, broker_id: int) -> dict[str, str]:
        urls = [f"{name}://127.0.0.1:{PORTS[broker_id] + i}" for i, name in enumerate(LISTENERS)]
        return {**super().broker_props(broker_id), "listeners": ",".join(urls),
                "advertised.listeners": ",".join(urls).replace("127.0.0.1", "localhost"),
                "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.keystore),
                "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas()}


def keystore(directory: Path) -> Path:
    """A broker key and certificate for localhost, made for this run (trustme)."""
    import trustme

    path = directory / "broker.pem"
    trustme.CA().issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem \
        .write_to_path(str(path))
    return path


def add_scram_user(cluster: EmbeddedCluster) -> None:
    """What KafkaJS's scripts/createScramCredentials.sh does with kafka-configs."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    user, passwords = SCRAM_USER
    for mechanism, password in passwords.items():  # one request each: a user twice in one
        # request is DUPLICATE_RESOURCE, as Kafka's controller answers
        upsert = UserScramCredentialUpsertion(user, ScramCredentialInfo(
            ScramMechanism[mechanism.replace("-", "_")], 4096), password.encode())
        for fut in admin.alter_user_scram_credentials([upsert]).values():
            fut.result(30)


def main(argv: list[str]) -> int:
    tests, argv = kafka_python_run.tests_arg(
        argv, "KafkaJS at the installed release's tag, npm installed")
    pki = Path(tempfile.mkdtemp(prefix="tidelog-kafkajs-"))
    cluster = KafkaJSCluster(keystore(pki)).start()
    add_scram_user(cluster)
    env = {**os.environ, "KAFKA_VERSION": KAFKA_VERSION, "NODE_ENV": "test",
           "KAFKAJS_DEBUG_PROTOCOL_BUFFERS": "1",
           "NODE_OPTIONS": "--dns-result-order=ipv4first"}
    try:
        return subprocess.run(
            [str(tests / "node_modules" / ".bin" / "jest"), "--ci", "--forceExit",
             "--no-watchman", "--maxWorkers=2", *argv],
            cwd=tests, env=env, check=False,
        ).returncode
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        lines = []
        for b in cluster.brokers.values():
            b.stop()
            lines += [f"[broker {b.broker_id}] {line}" for line in b.output]
        cluster.stop()
        shutil.rmtree(pki, ignore_errors=True)
        if os.environ.get("TIDELOG_COMPAT_BROKER_LOG"):
            Path(os.environ["TIDELOG_COMPAT_BROKER_LOG"]).write_text("".join(lines))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, kafka_python_run.on_sigterm)
    sys.exit(main(sys.argv[1:]))
