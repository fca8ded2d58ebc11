"""The admin commands (topics, configs, groups, acls, users, reassign) against a real broker:
a request the cluster refuses, bad input and a bootstrap server that never answers each end
as ONE line on stderr naming the cause and exit 1, never a traceback. (A port where nothing
listens: tests/cli/test_first_run.py; denials by the authorizer: test_security_cli.py.)"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
from cli_terminal import TIDELOG, cli

from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:
        yield b


def assert_one_line(r: subprocess.CompletedProcess[str], command: str, *causes: str,
                    prefix: str | None = None) -> None:
    """Exit 1, and stderr is one line: ``tidelog <command>: ...`` (or ``prefix``) naming
    every one of ``causes``."""
    lines = r.stderr.splitlines()
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(prefix or f"tidelog {command}: "), r.stderr
    for cause in causes:
        assert cause in lines[0], r.stderr


REFUSED = [
    # kafka-topics.sh's messages; INVALID_CONFIG as the broker's CreateTopics answer says it
    (("topics", "--describe", "--topic", "missing"), ("'missing' does not exist",)),
    (("topics", "--create", "--topic", "t1", "--config", "retention.ms=abc"),
     ("INVALID_CONFIG", "retention.ms", "abc")),
    (("topics", "--create", "--topic", "t2", "--config", "cleanup.policy=bogus"),
     ("INVALID_CONFIG", "cleanup.policy")),
    (("topics", "--create", "--topic", "t3", "--config", "no.such.config=1"),
     ("INVALID_CONFIG", "no.such.config")),
    (("topics", "--delete", "--topic", "missing"), ("UNKNOWN_TOPIC_OR_PART",)),
    (("topics", "--alter", "--topic", "missing", "--partitions", "3"),
     ("UNKNOWN_TOPIC_OR_PART",)),
    # IncrementalAlterConfigs refused by the broker's validation
    (("configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
      "--add-config", "log.retention.ms=abc"), ("INVALID_CONFIG", "log.retention.ms")),
    # Kafka's ConfigCommand refuses a quota that is not a number before sending anything
    (("configs", "--entity-type", "users", "--entity-name", "bob", "--alter",
      "--add-config", "producer_byte_rate=abc"),
     ("Cannot parse quota configuration value for producer_byte_rate: abc",)),
    # CreateAcls and DescribeAcls with no authorizer configured
    (("acls", "--add", "--allow-principal", "User:x", "--operation", "Read", "--topic", "t"),
     ("SECURITY_DISABLED",)),
    (("acls", "--list"), ("No Authorizer is configured.", "SECURITY_DISABLED")),
    (("users", "--describe", "nobody"), ("RESOURCE_NOT_FOUND", "nobody")),
    (("users", "--delete", "nobody"), ("RESOURCE_NOT_FOUND",)),
]


@pytest.mark.parametrize("args,causes", REFUSED, ids=[f"{a[0]}-{c[0]}" for a, c in REFUSED])
def test_a_refused_request_is_one_line(broker: EmbeddedBroker, args: tuple[str, ...],
                                       causes: tuple[str, ...]) -> None:
    r = cli(args[0], "--bootstrap-server", broker.bootstrap_servers, *args[1:])
    assert_one_line(r, args[0], *causes)


def test_deleting_a_missing_group_exits_1(broker: EmbeddedBroker) -> None:
    """DeleteGroups answers GROUP_ID_NOT_FOUND: kafka-consumer-groups.sh's line for the group,
    and exit 1 (the deletion was refused)."""
    r = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--delete",
            "--group", "missing")
    assert (r.returncode, r.stdout) == (1, "Deletion of group 'missing': GROUP_ID_NOT_FOUND\n")
    assert "Traceback" not in r.stderr, r.stderr


def test_a_missing_group_is_one_line(broker: EmbeddedBroker) -> None:
    r = cli("groups", "--bootstrap-server", broker.bootstrap_servers, "--describe",
            "--group", "missing")
    assert_one_line(r, "groups", "Consumer group 'missing' does not exist.", prefix="Error: ")


class _BlackHole:
    """A listener that accepts connections and never answers a byte: a broker that hangs."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                self.conns.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


# an admin command's first request, through librdkafka (reach: Metadata within the
# command's --timeout, else 10 s) or tidelog's own protocol client (quotas and client metrics
# configs, share groups: its 30 s socket timeout). A port where nothing listens:
# tests/cli/test_first_run.py
NEVER_ANSWERED = [
    ("topics", "--list"),
    ("configs", "--entity-type", "client-metrics", "--describe"),
    ("groups", "--list", "--timeout", "2000"),
    ("groups", "--list", "--type", "share"),
    ("users", "--describe"),
    ("reassign", "--list", "--timeout", "2000"),
]


def _run_all(bootstrap: str) -> list[tuple[tuple[str, ...], subprocess.CompletedProcess[str]]]:
    """Every NEVER_ANSWERED command at once (each mostly waits)."""
    procs = [(args, subprocess.Popen([*TIDELOG, args[0], "--bootstrap-server", bootstrap,
                                      *args[1:]], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
             for args in NEVER_ANSWERED]
    out = []
    for args, p in procs:
        stdout, stderr = p.communicate(timeout=150)
        out.append((args, subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)))
    return out


def test_a_broker_that_never_answers_is_one_line() -> None:
    hole = _BlackHole()
    try:
        bootstrap = f"127.0.0.1:{hole.port}"
        for args, r in _run_all(bootstrap):
            assert_one_line(r, args[0], f"cannot reach the bootstrap servers {bootstrap}",
                            prefix="Error: " if args[0] == "groups" and
                            "share" not in args else None)
            # tidelog's own client names the timeout, not the socket it closed on giving up
            assert "Bad file descriptor" not in r.stderr, r.stderr
            # the reason as the client saw it: its timeout, or librdkafka's all-brokers-down
            # when its connection attempt gave up first (a loaded machine)
            assert any(reason in r.stderr for reason in (
                "timed out", "transport failure", "brokers are down")), r.stderr
    finally:
        hole.close()
