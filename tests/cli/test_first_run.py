"""What a new user meets first, through the real `tidelog` command in subprocesses against real
brokers: a bootstrap server where nothing listens, a group consumer with an idle timeout, a
record the broker refuses, a line that is not JSON."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidelog.testing import EmbeddedBroker

TIDELOG = [sys.executable, "-m", "tidelog.cli.main"]
SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def tidelog(*args: str, stdin: str = "", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*TIDELOG, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=_env())


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# each command that talks to a broker, with its Kafka timeout option where its Kafka tool has
# one (ms), or None: the 10 s bound
DEAD_BOOTSTRAP_COMMANDS = {
    "topics --list": (["topics", "--list"], None),
    "topics --describe": (["topics", "--describe", "--topic", "t"], None),
    "produce": (["produce", "--topic", "t", "--request-timeout-ms", "2000"], 2.0),
    "consume": (["consume", "--topic", "t", "--timeout-ms", "2000"], 2.0),
    "consume --group": (["consume", "--topic", "t", "--group", "g", "--timeout-ms", "2000"], 2.0),
    "groups --list": (["groups", "--list", "--timeout", "2000"], 2.0),
    "groups --list --type": (["groups", "--list", "--type"], None),
    "configs brokers": (["configs", "--entity-type", "brokers", "--entity-default",
                         "--describe"], None),
    "configs clients": (["configs", "--entity-type", "clients", "--entity-name", "x",
                         "--describe"], None),
    "configs broker": (["configs", "--entity-type", "brokers", "--entity-name", "1",
                        "--describe"], None),
    "configs client-metrics": (["configs", "--entity-type", "client-metrics", "--describe"],
                               None),
    "acls": (["acls", "--list"], None),
    "users": (["users", "--describe"], None),
    "reassign": (["reassign", "--list", "--timeout", "2000"], 2.0),
    "perf produce": (["perf", "produce", "--topic", "t", "--num-records", "10", "--record-size",
                      "10", "--throughput", "-1"], None),
    "perf consume": (["perf", "consume", "--topic", "t", "--messages", "10", "--timeout",
                      "2000"], 2.0),
}


def test_a_dead_bootstrap_server_is_one_line_exit_1_in_bounded_time() -> None:
    """Every broker command against a port where nothing listens: exit 1 with one line naming
    the servers and the cause (no librdkafka log lines), within its timeout option or 10 s;
    all started at once so the test takes one bound, not their sum."""
    servers = f"127.0.0.1:{_dead_port()}"
    started = time.monotonic()
    procs = {
        name: subprocess.Popen([*TIDELOG, *args, "--bootstrap-server", servers],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=_env())
        for name, (args, _) in DEAD_BOOTSTRAP_COMMANDS.items()
    }
    ended: dict[str, float] = {}
    while len(ended) < len(procs) and time.monotonic() - started < 150:
        for name, proc in procs.items():
            if name not in ended and proc.poll() is not None:
                ended[name] = time.monotonic() - started
        time.sleep(0.05)
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=10)
        elapsed = ended[name]
        lines = err.splitlines()
        print(f"{name}: exit {proc.returncode} after {elapsed:.1f} s: {err.strip()}")
        assert proc.returncode == 1, (name, out, err)
        assert len(lines) == 1, (name, err)
        assert f"cannot reach the bootstrap servers {servers}" in lines[0], (name, err)
        assert "Connection refused" in lines[0], (name, err)
        assert "%3|" not in err and "KafkaError{" not in err, (name, err)
        # librdkafka's "(after 0ms in state CONNECT, 1 identical error(s) suppressed)" is cut
        assert "after 0ms" not in err and "suppressed" not in err, (name, err)
        waited = DEAD_BOOTSTRAP_COMMANDS[name][1]
        if waited is not None:
            assert f"within {waited:g} s" in lines[0], (name, err)
        # a generous deadline: the bound plus 75 s for 17 interpreters starting at once on a
        # machine shared with other runs (measured: 3-12 s each on a quiet one, up to 50 s at a
        # load of 16); without the bound librdkafka retries with no end in sight (consume,
        # groups) or for 60 s and then prints its own error (topics)
        assert elapsed < (waited or 10) + 75, (name, elapsed)


def test_debug_shows_librdkafkas_log_lines() -> None:
    servers = f"127.0.0.1:{_dead_port()}"
    r = tidelog("--debug", "consume", "--bootstrap-server", servers, "--topic", "t",
                "--timeout-ms", "1000")
    assert r.returncode != 0
    assert "Connection refused" in r.stderr and "|FAIL|" in r.stderr, r.stderr[-2000:]


@pytest.fixture(scope="module")
def broker() -> EmbeddedBroker:
    with EmbeddedBroker() as b:
        yield b  # type: ignore[misc]


def test_consume_group_idle_timeout_starts_once_the_partitions_are_assigned(
    broker: EmbeddedBroker,
) -> None:
    """A group's first join waits group.initial.rebalance.delay.ms (3 s): --timeout-ms 1500
    still prints the records, as Kafka's console consumer does."""
    bs = broker.bootstrap_servers
    assert tidelog("topics", "--bootstrap-server", bs, "--create", "--topic", "joined",
                   "--partitions", "2").returncode == 0
    produced = tidelog("produce", "--bootstrap-server", bs, "--topic", "joined",
                       stdin="".join(f"v{i}\n" for i in range(6)))
    assert produced.returncode == 0, produced.stderr
    r = tidelog("consume", "--bootstrap-server", bs, "--topic", "joined", "--group", "late",
                "--from-beginning", "--timeout-ms", "1500")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == [f"v{i}" for i in range(6)], r.stderr
    assert "Processed a total of 6 messages" in r.stderr
    described = tidelog("groups", "--bootstrap-server", bs, "--describe", "--group", "late")
    rows = [line.split() for line in described.stdout.splitlines() if line.startswith("late ")]
    assert sum(int(row[3]) for row in rows) == 6, described.stdout  # committed what it printed


def test_produce_prints_the_brokers_reason_for_a_refused_record(broker: EmbeddedBroker) -> None:
    """A keyless record to a compacted topic: Kafka's message, from the ProduceResponse."""
    bs = broker.bootstrap_servers
    assert tidelog("topics", "--bootstrap-server", bs, "--create", "--topic", "compacted",
                   "--config", "cleanup.policy=compact").returncode == 0
    r = tidelog("produce", "--bootstrap-server", bs, "--topic", "compacted", stdin="no key\n")
    assert r.returncode == 1
    assert "Broker failed to validate record" in r.stderr, r.stderr
    assert ("the broker's reason: One or more records have been rejected due to 1 record errors "
            "in total, and only showing the first three errors at most: [RecordError(batchIndex"
            "=0, message='Compacted topic cannot accept message without key in topic partition "
            "compacted-0')]") in r.stderr, r.stderr
    got = tidelog("consume", "--bootstrap-server", bs, "--topic", "compacted",
                  "--from-beginning", "--timeout-ms", "1000")
    assert got.stdout == "" and "Processed a total of 0 messages" in got.stderr  # nothing added


def test_a_line_that_is_not_json_is_named_with_its_number(broker: EmbeddedBroker) -> None:
    """Not JSON is not "does not fit the schema": the line number and the parse error, before
    the registry is asked anything (none listens here)."""
    r = tidelog("produce", "--bootstrap-server", broker.bootstrap_servers, "--topic", "typed",
                "--value-format", "json", "--schema-registry", f"http://127.0.0.1:{_dead_port()}",
                "--value-schema", '{"type": "object"}', stdin="{not json\n")
    assert r.returncode == 1
    assert "tidelog produce: line 1: not JSON: Expecting property name enclosed in double " \
           "quotes at column 2 (line skipped)" in r.stderr, r.stderr
    assert "does not fit the schema" not in r.stderr


def test_avro_produce_and_consume_print_no_http_request_lines() -> None:
    """The registry client's HTTP library logs each request at INFO: not on the CLI's stderr."""
    with EmbeddedBroker({"schema.registry.listeners": "http://127.0.0.1:0"}) as b:
        assert b.schema_registry is not None
        url, bs = b.schema_registry.url, b.bootstrap_servers
        schema = '{"type": "record", "name": "R", "fields": [{"name": "id", "type": "int"}]}'
        r = tidelog("produce", "--bootstrap-server", bs, "--topic", "avro", "--value-format",
                    "avro", "--schema-registry", url, "--value-schema", schema,
                    stdin='{"id": 7}\n')
        assert r.returncode == 0, r.stderr
        got = tidelog("consume", "--bootstrap-server", bs, "--topic", "avro", "--from-beginning",
                      "--max-messages", "1", "--value-format", "avro", "--schema-registry", url)
        assert got.stdout.strip() == '{"id": 7}', got.stderr
    for out in (r.stderr, got.stderr):
        assert "HTTP Request" not in out and "httpx" not in out, out
