"""`tidelog configs` (kafka-configs): client quotas for users / clients and broker configs,
altered and described against a real broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tidelog.cli.main import main
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def run(b: EmbeddedBroker, *args: str) -> int:
    return main(["configs", "--bootstrap-server", b.bootstrap_servers, *args])


def test_client_quotas(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(broker, "--entity-type", "clients", "--entity-name", "app", "--alter",
               "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152") == 0
    assert run(broker, "--entity-type", "users", "--entity-name", "alice",
               "--entity-type", "clients", "--entity-default", "--alter",
               "--add-config", "request_percentage=50") == 0
    capsys.readouterr()
    assert run(broker, "--entity-type", "clients", "--entity-name", "app", "--describe") == 0
    out = capsys.readouterr().out
    assert "client-id 'app'" in out
    assert "consumer_byte_rate=2097152" in out and "producer_byte_rate=1048576" in out
    assert run(broker, "--entity-type", "users", "--entity-name", "alice",
               "--entity-type", "clients", "--entity-default", "--describe") == 0
    assert "request_percentage=50" in capsys.readouterr().out
    assert run(broker, "--entity-type", "clients", "--entity-name", "app", "--alter",
               "--delete-config", "consumer_byte_rate") == 0
    capsys.readouterr()
    run(broker, "--entity-type", "clients", "--entity-name", "app", "--describe")
    out = capsys.readouterr().out
    assert "consumer_byte_rate" not in out and "producer_byte_rate=1048576" in out


def test_broker_configs(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    node = str(broker.broker.node_id)
    assert run(broker, "--entity-type", "brokers", "--entity-name", node, "--alter",
               "--add-config", "log.retention.ms=3600000") == 0
    capsys.readouterr()
    assert run(broker, "--entity-type", "brokers", "--entity-name", node, "--describe") == 0
    assert "log.retention.ms=3600000" in capsys.readouterr().out
    assert broker.broker.config.values["log.retention.ms"] == 3600000


def test_broker_default_configs(broker: EmbeddedBroker,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """--entity-default: the cluster-wide default (the BROKER resource named "", which
    librdkafka refuses to build), set, described and deleted; a value the broker refuses is
    one line naming Kafka's error."""
    args = ("--entity-type", "brokers", "--entity-default")
    assert run(broker, *args, "--alter", "--add-config", "log.cleaner.threads=2") == 0
    assert capsys.readouterr().out == (
        "Completed updating default config for brokers in the cluster.\n")
    assert run(broker, *args, "--describe") == 0
    assert capsys.readouterr().out == ("Default configs for brokers in the cluster are:\n"
                                       "  log.cleaner.threads=2 sensitive=false\n")
    # refused even where the broker's own value would hide it (Kafka checks the new values)
    node = str(broker.broker.node_id)
    assert run(broker, "--entity-type", "brokers", "--entity-name", node, "--alter",
               "--add-config", "log.retention.ms=3600000") == 0
    capsys.readouterr()
    assert run(broker, *args, "--alter", "--add-config", "log.retention.ms=abc") == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tidelog configs: "), err
    assert "log.retention.ms" in err[0] and "(INVALID_CONFIG)" in err[0], err
    assert run(broker, *args, "--alter", "--delete-config", "log.cleaner.threads") == 0
    capsys.readouterr()
    assert run(broker, *args, "--describe") == 0
    assert capsys.readouterr().out == "Default configs for brokers in the cluster are:\n"
