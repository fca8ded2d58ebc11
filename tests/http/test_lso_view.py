"""An open transaction holds the LSO back: /metrics and the segment picture show it, and it
catches up once the transaction commits."""

from __future__ import annotations

import confluent_kafka
from http_support import HTTP, get, sample, scrape, wait_for

from tidelog.testing import EmbeddedBroker


def test_open_transaction_holds_the_lso_back():
    config = {**HTTP, "transaction.state.log.num.partitions": "1",
              "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1"}  # fmt: skip
    with EmbeddedBroker(config) as eb:
        plain = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers})
        for i in range(5):
            plain.produce("txn", value=b"%d" % i, partition=0)
        assert plain.flush(30) == 0
        tx = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers,
                                       "transactional.id": "viewer-tx"})  # fmt: skip
        tx.init_transactions(30)
        tx.begin_transaction()
        for i in range(3):
            tx.produce("txn", value=b"t%d" % i, partition=0)
        assert tx.flush(30) == 0
        lag = "kafka_cluster_partition_laststableoffsetlag"
        s = scrape(eb.http_url)
        assert sample(s, lag, topic="txn", partition="0") == 3  # HW 8, LSO 5
        _, picture = get(eb.http_url + "/topics/txn/0")
        assert 'data-mark="LSO" data-offset="5"' in picture
        assert 'data-mark="HW" data-offset="8"' in picture
        tx.commit_transaction(30)
        wait_for(lambda: sample(scrape(eb.http_url), lag, topic="txn", partition="0") == 0,
                 "the LSO to reach the HW after the commit marker")  # fmt: skip
        _, picture = get(eb.http_url + "/topics/txn/0")
        assert 'data-mark="LSO" data-offset="9"' in picture  # after the commit marker
