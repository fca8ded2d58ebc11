"""``tidelog topics | produce | consume | groups | serve`` against a real ``tidelog serve``,
driven as a person drives them (pipes, and a terminal for the interactive cases), with the
output compared to what Kafka's tools print for the same case (their messages and formats,
quoted from Kafka's TopicCommand, ConsoleConsumer, LineMessageReader, ConsumerGroupCommand)
and to kcat reading the same topic."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pexpect
import pytest
from broker_clients import consume
from cli_terminal import cli, ctrl_c, popen, terminal
from confluent_kafka.admin import AdminClient
from serve_process import ServeProcess

from tidelog.server.allocator import _mallopt


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One broker for the module; no initial rebalance delay so group joins are quick."""
    proc = ServeProcess(
        tmp_path_factory.mktemp("serve"), overrides={"group.initial.rebalance.delay.ms": "0"}
    ).start()
    yield proc
    assert proc.stop() == 0, "".join(proc.stderr_lines[-30:])
    errors = [line for line in proc.stderr_lines if " ERROR " in line]
    assert not errors, "".join(errors[:20])
    # group.initial.rebalance.delay.ms is the group coordinator's key: known, not warned about
    assert not [line for line in proc.stderr_lines if "were supplied" in line]


def bs(serve: ServeProcess) -> list[str]:
    return ["--bootstrap-server", serve.bootstrap_servers]


def read_all(bootstrap: str, topic: str, n: int, timeout: float = 30) -> list[bytes]:
    """Values of the first ``n`` records (all partitions), read by confluent-kafka."""
    c = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "verify", "auto.offset.reset": "earliest"}
    )
    deadline = time.monotonic() + timeout
    while not (md := c.list_topics(topic, timeout=10).topics[topic]).partitions:
        assert time.monotonic() < deadline, f"{topic} was never created"  # a producer creates it
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in md.partitions])
    out: list[bytes] = []
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            out.append(m.value())
    c.close()
    return out


def kcat_lines(bootstrap: str, topic: str, fmt: str) -> str:
    return subprocess.run(
        ["kcat", "-b", bootstrap, "-t", topic, "-C", "-e", "-q", "-f", fmt],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


# ------------------------------------------------------------------------------- topics


def test_topics_lifecycle(serve: ServeProcess) -> None:
    b = bs(serve)
    r = cli("topics", *b, "--create", "--topic", "cli-t", "--partitions", "3",
            "--config", "retention.ms=60000")  # fmt: skip
    assert (r.returncode, r.stdout) == (0, "Created topic cli-t.\n"), r.stderr
    again = cli("topics", *b, "--create", "--topic", "cli-t", "--partitions", "3")
    assert again.returncode == 1
    assert again.stderr.startswith("tidelog topics: Error while executing topic command : ")
    assert "TOPIC_ALREADY_EXISTS" in again.stderr and again.stderr.count("\n") == 1
    assert cli("topics", *b, "--create", "--topic", "cli-t", "--if-not-exists").returncode == 0
    # TopicCommand refuses a partition count below 1 before asking the broker
    zero = cli("topics", *b, "--create", "--topic", "cli-zero", "--partitions", "0")
    assert zero.returncode == 1 and "The partitions must be greater than 0" in zero.stderr
    assert "cli-zero" not in cli("topics", *b, "--list").stdout.split()
    assert "cli-t" in cli("topics", *b, "--list").stdout.split()
    desc = cli("topics", *b, "--describe", "--topic", "cli-t").stdout.splitlines()
    head = desc[0].split("\t")
    assert head[0] == "Topic: cli-t" and head[1].startswith("TopicId: ")
    assert len(head[1].removeprefix("TopicId: ")) == 22  # Uuid.toString: 22 base64url chars
    assert head[2:] == ["PartitionCount: 3", "ReplicationFactor: 1", "Configs: retention.ms=60000"]
    assert desc[1] == (
        "\tTopic: cli-t\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
    )
    r = cli("topics", *b, "--alter", "--topic", "cli-t", "--partitions", "4",
            "--config", "cleanup.policy=compact", "--delete-config", "retention.ms")  # fmt: skip
    assert r.returncode == 0, r.stderr
    desc2 = cli("topics", *b, "--describe", "--topic", "cli-t").stdout
    assert "PartitionCount: 4" in desc2 and "cleanup.policy=compact" in desc2
    assert "retention.ms" not in desc2 and head[1] in desc2  # same TopicId after the alter
    assert cli("topics", *b, "--describe", "--topic", "cli-t", "--under-replicated-partitions")\
        .stdout == ""  # fmt: skip
    # TopicCommand's min-ISR reports: one broker, ISR of one against min.insync.replicas
    def reported(option: str) -> list[str]:
        out = cli("topics", *b, "--describe", "--topic", "cli-t", option).stdout
        return [line.split("\t")[2] for line in out.splitlines()]

    parts = [f"Partition: {p}" for p in range(4)]
    assert (reported("--at-min-isr-partitions"), reported("--under-min-isr-partitions")) == (
        parts, [])
    r = cli("topics", *b, "--alter", "--topic", "cli-t", "--config", "min.insync.replicas=2")
    assert r.returncode == 0, r.stderr
    assert (reported("--at-min-isr-partitions"), reported("--under-min-isr-partitions")) == (
        [], parts)
    assert reported("--unavailable-partitions") == []  # led by a live broker
    bad = cli("topics", *b, "--alter", "--topic", "cli-t", "--config", "no.such.config=1")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    assert cli("topics", *b, "--delete", "--topic", "cli-t").returncode == 0
    assert "cli-t" not in cli("topics", *b, "--list").stdout.split()
    gone = cli("topics", *b, "--describe", "--topic", "cli-t")
    assert gone.returncode == 1
    assert "Topic 'cli-t' does not exist as expected" in gone.stderr
    # describing a missing topic must not have created it
    assert "cli-t" not in cli("topics", *b, "--list").stdout.split()


# ------------------------------------------------------------------------------ produce


def test_produce_then_consume_matches_kcat(serve: ServeProcess) -> None:
    b = bs(serve)
    assert cli("topics", *b, "--create", "--topic", "cli-pc", "--partitions", "1").returncode == 0
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    r = cli("produce", *b, "--topic", "cli-pc", "--property", "parse.key=true",
            "--property", "key.separator=:", "--compression-codec", "zstd", stdin=lines)  # fmt: skip
    assert (r.returncode, r.stderr) == (0, "")
    out = cli("consume", *b, "--topic", "cli-pc", "--from-beginning", "--max-messages", "50",
              "--property", "print.key=true", "--property", "key.separator=:")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == lines
    assert out.stderr == "Processed a total of 50 messages\n"  # ConsoleConsumer's last line
    assert out.stdout == kcat_lines(serve.bootstrap_servers, "cli-pc", "%k:%s\n")
    tail = cli("consume", *b, "--topic", "cli-pc", "--partition", "0", "--offset", "48",
               "--max-messages", "2", "--property", "print.offset=true")  # fmt: skip
    assert tail.stdout == "Offset:48\tvalue 48\nOffset:49\tvalue 49\n"
    got = consume("kafka-python", serve.bootstrap_servers, "cli-pc", 50)
    assert [(r.key, r.value) for r in got] == [
        (f"key{i}".encode(), f"value {i}".encode()) for i in range(50)
    ]


def test_bad_line_is_reported_and_the_rest_sent(serve: ServeProcess) -> None:
    lines = "k1:one\nno separator\nk3:three\n\nk5:five\n"
    r = cli("produce", *bs(serve), "--topic", "cli-bad", "--property", "parse.key=true",
            "--property", "key.separator=:", stdin=lines)  # fmt: skip
    assert r.returncode == 1
    # LineMessageReader's message for the first; the empty line 4 is bad too
    assert "No key separator found on line number 2: 'no separator'" in r.stderr
    assert "No key separator found on line number 4: ''" in r.stderr
    assert "2 lines skipped" in r.stderr
    assert read_all(serve.bootstrap_servers, "cli-bad", 3) == [b"one", b"three", b"five"]


def test_produce_creates_a_missing_topic_as_kcat_does(serve: ServeProcess) -> None:
    r = cli("produce", *bs(serve), "--topic", "cli-auto", stdin="first\nsecond\n")
    assert (r.returncode, r.stderr) == (0, "")
    assert kcat_lines(serve.bootstrap_servers, "cli-auto", "%s\n") == "first\nsecond\n"


def test_typed_lines_arrive_while_the_producer_waits_and_ctrl_c_loses_none(
    serve: ServeProcess,
) -> None:
    child = terminal("produce", *bs(serve), "--topic", "cli-typed")
    child.expect_exact(">")  # Kafka's console producer prompts at a terminal
    child.sendline("hello")
    child.expect_exact(">")
    # nothing more is typed, no EOF: the line still arrives (linger, not batch count)
    assert read_all(serve.bootstrap_servers, "cli-typed", 1) == [b"hello"]
    # now lines that wait in the producer for a long linger, then Ctrl-C
    child.close()
    child = terminal("produce", *bs(serve), "--topic", "cli-typed", "--timeout", "100000")
    for i in range(30):
        child.expect_exact(">")
        child.sendline(f"line {i}")
    child.expect_exact(">")  # the last line was read
    assert ctrl_c(child) == 130
    got = read_all(serve.bootstrap_servers, "cli-typed", 31)
    assert got == [b"hello"] + [f"line {i}".encode() for i in range(30)]


def test_eof_on_a_pipe_flushes_everything(serve: ServeProcess) -> None:
    proc = popen("produce", *bs(serve), "--topic", "cli-pipe", "--timeout", "100000")
    out, err = proc.communicate("".join(f"{i}\n" for i in range(388)), timeout=60)
    assert (proc.returncode, out, err) == (0, "", "")
    assert read_all(serve.bootstrap_servers, "cli-pipe", 388) == [
        str(i).encode() for i in range(388)
    ]


def test_produce_is_idempotent_with_headers(serve: ServeProcess) -> None:
    from tidelog.client.kafka_client import KafkaClient, TopicPartition

    b = bs(serve)
    assert cli("topics", *b, "--create", "--topic", "cli-h", "--partitions", "1").returncode == 0
    r = cli("produce", *b, "--topic", "cli-h", "--header", "src=cli", "--header", "n=1",
            "--batch-size", "2", stdin="a\nb\nc\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = cli("consume", *b, "--topic", "cli-h", "--from-beginning", "--max-messages", "3",
              "--property", "print.headers=true", "--property", "print.offset=true",
              "--property", "key.separator=|")  # fmt: skip
    assert out.stdout == (
        "Offset:0|src:cli,n:1|a\nOffset:1|src:cli,n:1|b\nOffset:2|src:cli,n:1|c\n"
    )
    tp = TopicPartition("cli-h", 0)
    with KafkaClient(serve.bootstrap_servers) as kc:
        batches = list(kc.fetch({tp: 0})[tp].batches())
    assert [b.base_sequence for b in batches] == [0, 2]
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    plain = cli("produce", *b, "--topic", "cli-h", "--no-idempotence", stdin="d\n")
    assert plain.returncode == 0, plain.stderr


def test_headers_and_null_marker_in_lines(serve: ServeProcess) -> None:
    r = cli("produce", *bs(serve), "--topic", "cli-hl", "--property", "parse.headers=true",
            "--property", "parse.key=true", "--property", "null.marker=-",
            stdin="h1:v1,h2:v2\tk\tv\n-\t-\tv2\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = cli("consume", *bs(serve), "--topic", "cli-hl", "--from-beginning",
              "--max-messages", "2", "--property", "print.headers=true",
              "--property", "print.key=true")  # fmt: skip
    assert out.stdout == "h1:v1,h2:v2\tk\tv\nNO_HEADERS\tnull\tv2\n"


# ------------------------------------------------------------------------------ consume


def test_consumer_at_a_terminal_prints_lines_as_they_come(serve: ServeProcess) -> None:
    b = bs(serve)
    assert cli("topics", *b, "--create", "--topic", "cli-live").returncode == 0
    child = terminal("consume", *b, "--topic", "cli-live")
    p = ck.Producer({"bootstrap.servers": serve.bootstrap_servers, "linger.ms": 0})
    for word in ("one", "two", "three"):
        # the consumer starts at the end: keep producing until it has seen the first word
        deadline = time.monotonic() + 30
        while True:
            p.produce("cli-live", word.encode())
            p.flush(10)
            try:
                child.expect_exact(f"{word}\r\n", timeout=1)
                break
            except pexpect.TIMEOUT:
                assert time.monotonic() < deadline, child.before
    child.sendintr()
    child.expect(r"Processed a total of (\d+) messages")
    assert int(child.match.group(1)) >= 3
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130


def test_typed_at_one_terminal_shown_at_another(serve: ServeProcess) -> None:
    """The quick-start as a person does it: a consumer waiting on a topic nobody created yet,
    a producer in another terminal, lines typed one by one appearing in the consumer."""
    b = bs(serve)
    consumer = terminal("consume", *b, "--topic", "cli-chat", "--from-beginning")
    consumer.expect_exact("does not exist yet")  # it says why nothing comes, and waits
    producer = terminal("produce", *b, "--topic", "cli-chat")
    for line in ("hello", "how are you?", "bye"):
        producer.expect_exact(">")
        producer.sendline(line)
        consumer.expect_exact(f"{line}\r\n")  # shown while the producer is still open
    producer.expect_exact(">")
    producer.sendeof()  # Ctrl-D: the producer ends normally
    producer.expect(pexpect.EOF)
    producer.close()
    assert producer.exitstatus == 0
    assert ctrl_c(consumer) == 130
    assert "Processed a total of 3 messages" in str(consumer.before)


def _lines(proc: subprocess.Popen[str], sink: list[str]) -> threading.Thread:
    assert proc.stdout is not None
    stdout = proc.stdout

    def pump() -> None:
        for line in stdout:
            sink.append(line)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def test_two_group_consumers_share_the_partitions(serve: ServeProcess) -> None:
    b = bs(serve)
    assert (
        cli("topics", *b, "--create", "--topic", "cli-share", "--partitions", "4").returncode == 0
    )
    args = ("consume", *b, "--topic", "cli-share", "--group", "cli-share-g",
            "--from-beginning", "--property", "print.partition=true")  # fmt: skip
    procs = [popen(*args), popen(*args)]
    outs: list[list[str]] = [[], []]
    pumps = [_lines(p, o) for p, o in zip(procs, outs, strict=True)]
    admin = AdminClient({"bootstrap.servers": serve.bootstrap_servers})
    deadline = time.monotonic() + 60
    while True:  # both joined and the group settled with two members
        [f] = admin.describe_consumer_groups(["cli-share-g"]).values()
        try:
            g = f.result(10)
        except TimeoutError:
            # librdkafka's admin client retries FindCoordinator twice, 100 ms apart, and
            # then waits out its request timeout: the first describe of a broker that is
            # still making __consumer_offsets (this test alone) may not answer; ask again
            assert time.monotonic() < deadline, "no describe of the group answered"
            continue
        assignments = [len(m.assignment.topic_partitions) for m in g.members]
        if g.state == ck.ConsumerGroupState.STABLE and sorted(assignments) == [2, 2]:
            break
        assert time.monotonic() < deadline, (g.state, assignments)
    p = ck.Producer({"bootstrap.servers": serve.bootstrap_servers, "linger.ms": 5})
    for i in range(40):
        p.produce("cli-share", f"v{i}".encode(), partition=i % 4)
    p.flush(10)
    deadline = time.monotonic() + 60
    while len(outs[0]) + len(outs[1]) < 40:
        assert time.monotonic() < deadline, outs
    desc = cli("groups", *b, "--describe", "--group", "cli-share-g", "--members")
    for proc in procs:
        proc.send_signal(2)
    for proc, pump in zip(procs, pumps, strict=True):
        _, err = proc.communicate(timeout=30)
        pump.join(10)
        assert "Processed a total of" in err
    parts = [{line.split("\t")[0] for line in out} for out in outs]
    assert parts[0] and parts[1] and not parts[0] & parts[1]
    assert parts[0] | parts[1] == {f"Partition:{i}" for i in range(4)}
    assert sorted(line.split("\t")[1] for out in outs for line in out) == sorted(
        f"v{i}\n" for i in range(40)
    )
    assert desc.stdout.count("cli-share-g") == 2, desc.stdout  # two member rows


def test_consume_with_group_resumes_from_committed_offsets(serve: ServeProcess) -> None:
    b = bs(serve)
    assert cli("topics", *b, "--create", "--topic", "cli-g", "--partitions", "1").returncode == 0
    lines = "".join(f"m{i}\n" for i in range(6))
    assert cli("produce", *b, "--topic", "cli-g", stdin=lines).returncode == 0
    group = ("--topic", "cli-g", "--group", "g1", "--from-beginning")
    first = cli("consume", *b, *group, "--max-messages", "4")
    assert first.stdout == "m0\nm1\nm2\nm3\n", first.stderr
    second = cli("consume", *b, *group, "--max-messages", "2")
    assert second.stdout == "m4\nm5\n", second.stderr
    c = ck.Consumer({"bootstrap.servers": serve.bootstrap_servers, "group.id": "g1"})
    [tp] = c.committed([ck.TopicPartition("cli-g", 0)], 10)
    c.close()
    assert tp.offset == 6


def test_consume_waits_for_a_missing_topic_then_times_out(serve: ServeProcess) -> None:
    r = cli("consume", *bs(serve), "--topic", "cli-missing", "--timeout-ms", "500")
    assert r.returncode == 0 and r.stdout == ""
    assert "cli-missing" in r.stderr and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    assert r.stderr.endswith("Processed a total of 0 messages\n")


# ------------------------------------------------------------------------ groups, errors


def test_describing_a_missing_group_fails(serve: ServeProcess) -> None:
    r = cli("groups", *bs(serve), "--describe", "--group", "no-such-group")
    assert r.returncode == 1
    assert r.stderr == "Error: Consumer group 'no-such-group' does not exist.\n"


def test_errors_are_one_line_and_debug_shows_the_traceback(
    serve: ServeProcess, tmp_path: Path
) -> None:
    r = cli("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "x",
            "--request-timeout-ms", "1000", stdin="a\n")  # fmt: skip
    assert r.returncode == 1 and r.stderr == (
        "tidelog produce: cannot reach the bootstrap servers 127.0.0.1:1 within 1 s: "
        "Connect to ipv4#127.0.0.1:1 failed: Connection refused\n")
    missing = tmp_path / "client.properties"
    r = cli("produce", *bs(serve), "--topic", "x", "--command-config", str(missing), stdin="")
    assert r.returncode == 1
    assert r.stderr == f"tidelog produce: cannot read {missing}: No such file or directory\n"
    r = cli("consume", *bs(serve), "--topic", "x", "--consumer-property", "no.such.setting=1")
    assert r.returncode == 1 and r.stderr.startswith("tidelog consume: invalid client config")
    assert "no.such.setting" in r.stderr and "Traceback" not in r.stderr
    r = cli("--debug", "consume", *bs(serve), "--topic", "x", "--consumer-property", "no.such=1")
    assert r.returncode == 1 and "Traceback" in r.stderr
    r = cli("serve", "--override", "node.id=abc")
    assert r.returncode == 2 and "node.id" in r.stderr and "Traceback" not in r.stderr


def test_command_config_reaches_librdkafka(serve: ServeProcess, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_bytes(b"# client caf\xe9\nclient.id=from-file\nsecurity.protocol=PLAINTEXT\n")
    r = cli("produce", *bs(serve), "--topic", "cli-cc", "--command-config", str(props),
            stdin="x\n")  # fmt: skip
    assert (r.returncode, r.stderr) == (0, "")
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=NOPE\n")
    r = cli("produce", *bs(serve), "--topic", "cli-cc", "--command-config", str(props), stdin="")
    assert r.returncode == 1
    assert r.stderr == (
        "tidelog produce: invalid client configuration: "
        "Failed to create producer: Unsupported SASL mechanism: NOPE\n"
    )


def test_version_and_serve_usage() -> None:
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("tidelog ")
    r = cli("serve", "--port", "abc")
    assert r.returncode == 2 and r.stderr.startswith("usage: tidelog serve")


# -------------------------------------------------------------------------------- serve


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_port_option_listens_there(tmp_path: Path) -> None:
    port = _free_port()
    proc = ServeProcess(tmp_path / "logs", extra_args=["--port", str(port)])
    # ServeProcess's listener override is replaced by --port, which wins
    proc.start()
    try:
        assert proc.port == port
        if _mallopt() is not None:  # serve owns the process: it tunes glibc for its frames
            assert any("allocator: glibc, mmap threshold" in line for line in proc.stderr_lines)
        assert cli("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list").returncode == 0
    finally:
        assert proc.stop() == 0


def test_serve_reads_server_properties_as_java_does(tmp_path: Path) -> None:
    from tidelog.client.kafka_client import KafkaClient

    props = tmp_path / "server.properties"
    props.write_bytes(
        "# tidelog test, caf\u00e9 (a Latin-1 byte, as Java writes it)\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'from-file'}\n"
        "num.partitions=3\n"
        "node.id = \\\n   7\n"
        "log.retenton.hours=1\n".encode("iso-8859-1")
    )
    proc = ServeProcess(
        tmp_path / "from-override", overrides={"num.partitions": "2"}, extra_args=["-c", str(props)]
    )
    proc.start()
    try:
        with KafkaClient(proc.bootstrap_servers) as kc:
            md = kc.metadata(["from-props"], auto_create=True)
        assert sorted(md.topics["from-props"]) == [0, 1]  # --override num.partitions=2
        assert md.controller_id == 7 and list(md.brokers) == [7]  # node.id, continued line
        assert (tmp_path / "from-override" / "from-props-0").is_dir()
        assert not (tmp_path / "from-file").exists()
    finally:
        assert proc.stop() == 0
    warnings = [line for line in proc.stderr_lines if "were supplied" in line]
    assert len(warnings) == 1 and " WARNING " in warnings[0]
    # only the misspelt key: node.id, num.partitions... and the override are all known
    assert warnings[0].rstrip().endswith(
        "These configurations '[log.retenton.hours]' were supplied but are not used yet."
    )


def test_serve_rejects_a_bad_properties_file(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0\nnum.partitions=many\n")
    r = cli("serve", "-c", str(props))
    assert r.returncode == 2 and "num.partitions" in r.stderr and str(props) in r.stderr
    r = cli("serve", "-c", str(tmp_path / "missing.properties"))
    assert r.returncode == 2 and "missing.properties" in r.stderr


def test_serve_port_in_use_exits_non_zero(serve: ServeProcess, tmp_path: Path) -> None:
    r = cli("serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{serve.port}",
            "--override", f"log.dirs={tmp_path}")  # fmt: skip
    assert r.returncode == 1 and "broker failed" in r.stderr


def test_serve_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    import signal

    proc = ServeProcess(tmp_path / "logs").start()
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGINT)
    assert proc.proc.wait(30) == 0
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()


# --------------------------------------------------------------------------------- perf


def test_perf_produce_and_consume_print_kafkas_lines(serve: ServeProcess) -> None:
    import re

    b = bs(serve)
    r = cli("perf", "produce", *b, "--topic", "cli-perf", "--num-records", "2000",
            "--record-size", "50", "--throughput", "-1", "--producer-props", "acks=1")  # fmt: skip
    assert r.returncode == 0, r.stderr
    # ProducerPerformance.printTotal's format
    final = r"^2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    final += r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$"
    assert re.match(final, r.stdout.splitlines()[-1]), r.stdout
    r = cli("perf", "consume", *b, "--topic", "cli-perf", "--messages", "2000")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "2000" and fields[2] == f"{2000 * 50 / 2**20:.4f}"


def test_sync_sends_each_line_alone_and_producer_property_reaches_librdkafka(
    serve: ServeProcess,
) -> None:
    from tidelog.client.kafka_client import KafkaClient, TopicPartition

    b = bs(serve)
    assert cli("topics", *b, "--create", "--topic", "cli-sync").returncode == 0
    lines = "".join(c * 500 + "\n" for c in "abc")  # compressible: librdkafka sends gzip
    r = cli("produce", *b, "--topic", "cli-sync", "--sync",
            "--producer-property", "compression.type=gzip", stdin=lines)  # fmt: skip
    assert (r.returncode, r.stderr) == (0, "")
    tp = TopicPartition("cli-sync", 0)
    with KafkaClient(serve.bootstrap_servers) as kc:
        batches = list(kc.fetch({tp: 0})[tp].batches())
    # one acknowledged send at a time: a batch per line, each gzip (codec 1)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 0), (1, 1), (2, 2)]
    assert {b.compression for b in batches} == {1}


def test_isolation_level(serve: ServeProcess) -> None:
    p = ck.Producer({"bootstrap.servers": serve.bootstrap_servers, "transactional.id": "cli-tx"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("cli-iso", b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("cli-iso", b"committed")
    p.commit_transaction(30)
    args = ("consume", *bs(serve), "--topic", "cli-iso", "--from-beginning")
    # Kafka's tool reads uncommitted by default
    assert cli(*args, "--max-messages", "2").stdout == "aborted\ncommitted\n"
    # the first record read committed is the committed one (the aborted one would come first)
    read = cli(*args, "--max-messages", "1", "--isolation-level", "read_committed")
    assert read.stdout == "committed\n"


def test_consume_include_pattern(serve: ServeProcess) -> None:
    b = bs(serve)
    for topic in ("cli-inc-a", "cli-inc-b", "cli-other"):
        assert cli("produce", *b, "--topic", topic, stdin=f"{topic}\n").returncode == 0
    r = cli("consume", *b, "--include", "cli-inc-.*", "--from-beginning", "--max-messages", "2")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["cli-inc-a", "cli-inc-b"]
    both = cli("consume", *b, "--include", "x", "--topic", "y")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
