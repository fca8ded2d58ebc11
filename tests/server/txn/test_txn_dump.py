"""``tidelog dump-log`` on transaction files: ``--transaction-log-decoder`` prints each
``__transaction_state`` record's id and state, ``.txnindex`` files list aborted
transactions (producer id, first/last offset, last stable offset)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from tidelog.cli.dump_log import dump_file
from tidelog.testing import EmbeddedBroker


def test_dump_transaction_log_and_txn_index(tmp_path: Path) -> None:
    with EmbeddedBroker({"transaction.state.log.num.partitions": 1}, log_dir=tmp_path) as b:
        b.broker.replica_manager.create_topic("dumped", 1, {})
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "dump-tx"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("dumped", value=b"x", partition=0)
        p.flush(30)
        p.abort_transaction(30)
        del p
    state_log = next((tmp_path / "__transaction_state-0").glob("*.log"))
    result = dump_file(state_log, deep=True, print_data=False, verify_only=False,
                       txn_decoder=True)
    decoded = [r["decoded"] for b in result.items for r in b.get("records", [])]
    assert not result.errors
    assert all(d.startswith("key: transaction_metadata::transactionalId=dump-tx payload: ")
               for d in decoded)
    states = [d.split("state=")[1].split(",")[0] for d in decoded]
    assert states == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
    assert "partitions=[dumped-0]" in decoded[1]
    txn_index = next((tmp_path / "dumped-0").glob("*.txnindex"))
    out = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "dump-log", "--json", str(txn_index)],
        capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert doc["errors"] == []
    assert [(e["producerId"] >= 0, e["firstOffset"], e["lastOffset"], e["lastStableOffset"])
            for e in doc["entries"]] == [(True, 0, 1, 2)]
