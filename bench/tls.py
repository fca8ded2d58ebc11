"""Throughput over TLS and SASL_SSL against plaintext, in the same run on the same broker.

One ``tidelog serve`` child process with three listeners (PLAINTEXT, SSL, SASL_SSL with
SCRAM-SHA-512), certificates generated for the run (trustme). For each listener:
confluent-kafka produces N records of S bytes (acks=1, lz4 off, linger 5 ms) to a fresh
topic and a consumer reads them back from the beginning. One warm-up round per listener, then
REPEATS rounds in rotation (so drift hits every listener alike); figures are MB/s of record
values, median and range, and the ratio of each secure listener to plaintext.

Run: .venv/bin/python bench/tls.py [--records 200000] [--size 512] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

import confluent_kafka
import trustme
from broker import free_port, wait_port  # bench/broker.py
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")


def start_broker(d: str, ca: trustme.CA) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = os.path.join(d, "broker.pem")
    cert.private_key_and_cert_chain_pem.write_to_path(keystore)
    ports = {name: free_port() for name in LISTENERS}
    overrides = {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "log.dirs": os.path.join(d, "logs"),
        "ssl.keystore.location": keystore,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    cmd = [sys.executable, "-m", "tidelog.cli.main", "--log-level", "WARNING", "serve"]
    for k, v in overrides.items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for port in ports.values():
        wait_port(port, proc)
    return proc, ports


def client_conf(listener: str, port: int, ca_file: str) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}",
                            "security.protocol": listener}
    if listener != "PLAINTEXT":
        conf["ssl.ca.location"] = ca_file
    if listener == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                     "sasl.password": "bench-pw"})
    return conf


def one_round(conf: dict[str, Any], records: int, size: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) for a fresh topic."""
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    value = os.urandom(size)
    p = confluent_kafka.Producer({**conf, "linger.ms": 5, "acks": 1,
                                  "queue.buffering.max.messages": 1_000_000})
    t0 = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    produce_s = time.perf_counter() - t0
    c = confluent_kafka.Consumer({**conf, "group.id": topic, "enable.auto.commit": False,
                                  "fetch.max.bytes": 52428800})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = 0
    t0 = time.perf_counter()
    while got < records:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    consume_s = time.perf_counter() - t0
    c.close()
    mb = records * size / 1e6
    return mb / produce_s, mb / consume_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="tidelog-bench-tls-")
    ca = trustme.CA()
    ca_file = os.path.join(d, "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    proc, ports = start_broker(d, ca)
    try:
        admin = AdminClient(client_conf("PLAINTEXT", ports["PLAINTEXT"], ca_file))
        upsert = UserScramCredentialUpsertion(
            "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-pw")
        admin.alter_user_scram_credentials([upsert])["bench"].result(30)
        confs = {n: client_conf(n, ports[n], ca_file) for n in LISTENERS}
        for conf in confs.values():  # warm-up
            one_round(conf, max(1000, args.records // 10), args.size)
        results: dict[str, list[tuple[float, float]]] = {n: [] for n in LISTENERS}
        for _ in range(args.repeats):
            for name, conf in confs.items():
                results[name].append(one_round(conf, args.records, args.size))
        report(results, args)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(d, ignore_errors=True)


def report(results: dict[str, list[tuple[float, float]]], args: argparse.Namespace) -> None:
    print(f"{args.records} records x {args.size} B, {args.repeats} rounds after warm-up; "
          "MB/s of values, median [min-max]")
    base = {k: statistics.median(r[k] for r in results["PLAINTEXT"]) for k in (0, 1)}
    for name, rounds in results.items():
        cells = []
        for k, what in ((0, "produce"), (1, "consume")):
            xs = [r[k] for r in rounds]
            med = statistics.median(xs)
            cells.append(f"{what} {med:7.1f} [{min(xs):.1f}-{max(xs):.1f}] "
                         f"x{med / base[k]:.2f}")
        print(f"{name:10s} " + "   ".join(cells))


if __name__ == "__main__":
    main()
