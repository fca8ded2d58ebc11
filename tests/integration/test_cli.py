"""``tidelog topics | produce | consume`` against a real ``tidelog serve``."""

from __future__ import annotations

import subprocess
import sys

from broker_clients import consume


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_topics_lifecycle(serve) -> None:  # type: ignore[no-untyped-def]
    bs = ["--bootstrap-server", serve.bootstrap_servers]
    r = cli(
        "topics",
        *bs,
        "--create",
        "--topic",
        "cli-t",
        "--partitions",
        "3",
        "--config",
        "retention.ms=60000",
    )
    assert r.returncode == 0, r.stderr
    again = cli("topics", *bs, "--create", "--topic", "cli-t", "--partitions", "3")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert cli("topics", *bs, "--create", "--topic", "cli-t", "--if-not-exists").returncode == 0
    assert "cli-t" in cli("topics", *bs, "--list").stdout.split()
    desc = cli("topics", *bs, "--describe", "--topic", "cli-t").stdout
    assert "PartitionCount: 3" in desc and "retention.ms=60000" in desc
    r = cli(
        "topics",
        *bs,
        "--alter",
        "--topic",
        "cli-t",
        "--partitions",
        "4",
        "--config",
        "cleanup.policy=compact",
        "--delete-config",
        "retention.ms",
    )
    assert r.returncode == 0, r.stderr
    desc = cli("topics", *bs, "--describe", "--topic", "cli-t").stdout
    assert "PartitionCount: 4" in desc and "cleanup.policy=compact" in desc
    assert "retention.ms" not in desc
    bad = cli("topics", *bs, "--alter", "--topic", "cli-t", "--config", "no.such.config=1")
    assert bad.returncode == 1 and "INVALID_CONFIG" in bad.stderr
    assert cli("topics", *bs, "--delete", "--topic", "cli-t").returncode == 0
    assert "cli-t" not in cli("topics", *bs, "--list").stdout.split()
    gone = cli("topics", *bs, "--describe", "--topic", "cli-t")
    assert gone.returncode == 1


def test_produce_then_consume(serve) -> None:  # type: ignore[no-untyped-def]
    bs = ["--bootstrap-server", serve.bootstrap_servers]
    assert cli("topics", *bs, "--create", "--topic", "cli-pc", "--partitions", "1").returncode == 0
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    r = cli(
        "produce",
        *bs,
        "--topic",
        "cli-pc",
        "--key-separator",
        ":",
        "--compression",
        "zstd",
        stdin=lines,
    )
    assert r.returncode == 0, r.stderr
    out = cli(
        "consume",
        *bs,
        "--topic",
        "cli-pc",
        "--from-beginning",
        "--max-messages",
        "50",
        "--print-key",
        "--key-separator",
        ":",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == lines
    tail = cli(
        "consume",
        *bs,
        "--topic",
        "cli-pc",
        "--partition",
        "0",
        "--offset",
        "48",
        "--max-messages",
        "2",
    )
    assert tail.stdout == "value 48\nvalue 49\n"
    # a real client sees the same records
    got = consume("kafka-python", serve.bootstrap_servers, "cli-pc", 50)
    assert [(r.key, r.value) for r in got] == [
        (f"key{i}".encode(), f"value {i}".encode()) for i in range(50)
    ]


def test_cli_errors_exit_non_zero(serve) -> None:  # type: ignore[no-untyped-def]
    r = cli(
        "consume",
        "--bootstrap-server",
        serve.bootstrap_servers,
        "--topic",
        "missing-topic",
        "--from-beginning",
        "--max-messages",
        "1",
    )
    assert r.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    r = cli("produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "x", stdin="a\n")
    assert r.returncode == 1 and "Error" in r.stderr
    r = cli("serve", "--override", "node.id=abc")
    assert r.returncode == 2 and "node.id" in r.stderr


def test_consume_with_group_resumes_from_committed_offsets(serve) -> None:  # type: ignore[no-untyped-def]
    bs = ["--bootstrap-server", serve.bootstrap_servers]
    assert cli("topics", *bs, "--create", "--topic", "cli-g", "--partitions", "1").returncode == 0
    assert (
        cli(
            "produce", *bs, "--topic", "cli-g", stdin="".join(f"m{i}\n" for i in range(6))
        ).returncode
        == 0
    )
    first = cli(
        "consume",
        *bs,
        "--topic",
        "cli-g",
        "--group",
        "g1",
        "--from-beginning",
        "--max-messages",
        "4",
    )
    assert first.stdout == "m0\nm1\nm2\nm3\n", first.stderr
    second = cli(
        "consume",
        *bs,
        "--topic",
        "cli-g",
        "--group",
        "g1",
        "--from-beginning",
        "--max-messages",
        "2",
    )
    assert second.stdout == "m4\nm5\n", second.stderr
    # a real client sees the group's committed offset
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": serve.bootstrap_servers, "group.id": "g1"})
    [tp] = c.committed([ck.TopicPartition("cli-g", 0)], 10)
    c.close()
    assert tp.offset == 6


def test_serve_reads_server_properties_and_overrides(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from serve_process import ServeProcess

    from tidelog.protocol.client import KafkaClient

    props = tmp_path / "server.properties"
    props.write_text(
        "# tidelog test\n"
        "listeners=PLAINTEXT://127.0.0.1:0\n"
        f"log.dirs={tmp_path / 'from-file'}\n"
        "num.partitions=3\n"
        "node.id = 7\n"
    )
    proc = ServeProcess(
        tmp_path / "from-override", overrides={"num.partitions": "2"}, extra_args=["-c", str(props)]
    )
    # the fixture's listeners/log.dirs overrides win over the file, as --override should
    proc.start()
    try:
        with KafkaClient(proc.bootstrap_servers) as kc:
            md = kc.metadata(["from-props"], auto_create=True)
        assert sorted(md.topics["from-props"]) == [0, 1]  # --override num.partitions=2
        assert md.controller_id == 7 and list(md.brokers) == [7]  # node.id from the file
        assert (tmp_path / "from-override" / "from-props-0").is_dir()
        assert not (tmp_path / "from-file").exists()
    finally:
        assert proc.stop() == 0


def test_serve_rejects_a_bad_properties_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    props = tmp_path / "bad.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0\nthis line has no separator\n")
    r = cli("serve", "-c", str(props))
    assert r.returncode == 2 and "line 2" in r.stderr
    r = cli("serve", "-c", str(tmp_path / "missing.properties"))
    assert r.returncode == 2 and "missing.properties" in r.stderr


def test_serve_port_in_use_exits_non_zero(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = cli(
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{serve.port}",
        "--override",
        f"log.dirs={tmp_path}",
    )
    assert r.returncode == 1 and "broker failed" in r.stderr


def test_produce_is_idempotent_with_headers(serve) -> None:  # type: ignore[no-untyped-def]
    from tidelog.protocol.client import KafkaClient, TopicPartition

    bs = ["--bootstrap-server", serve.bootstrap_servers]
    assert cli("topics", *bs, "--create", "--topic", "cli-h", "--partitions", "1").returncode == 0
    r = cli(
        "produce",
        *bs,
        "--topic",
        "cli-h",
        "--header",
        "src=cli",
        "--header",
        "n=1",
        "--batch-size",
        "2",
        stdin="a\nb\nc\n",
    )
    assert r.returncode == 0, r.stderr
    out = cli(
        "consume",
        *bs,
        "--topic",
        "cli-h",
        "--from-beginning",
        "--max-messages",
        "3",
        "--print-headers",
        "--print-offset",
        "--key-separator",
        "|",
    )
    assert out.stdout == "0:0|src:cli,n:1|a\n0:1|src:cli,n:1|b\n0:2|src:cli,n:1|c\n"
    with KafkaClient(serve.bootstrap_servers) as kc:
        batches = list(
            kc.fetch({TopicPartition("cli-h", 0): 0})[TopicPartition("cli-h", 0)].batches()
        )
    assert [b.base_sequence for b in batches] == [0, 2]
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0
    plain = cli("produce", *bs, "--topic", "cli-h", "--no-idempotence", stdin="d\n")
    assert plain.returncode == 0, plain.stderr


def test_serve_stops_cleanly_on_sigint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import signal

    from serve_process import ServeProcess

    proc = ServeProcess(tmp_path / "logs").start()
    assert proc.proc is not None
    proc.proc.send_signal(signal.SIGINT)
    assert proc.proc.wait(30) == 0
    assert (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
