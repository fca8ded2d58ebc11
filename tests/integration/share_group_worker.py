"""A KIP-932 share consumer (confluent-kafka ``ShareConsumer``, explicit acknowledgement) in
its own process, for test_share_group_confluent.py (no tests here).

    python share_group_worker.py BOOTSTRAP GROUP TOPIC

Polls and never acknowledges: it writes one JSON line per record it holds,
{"offset": n, "delivery_count": k}, and waits to be killed.
"""

from __future__ import annotations

import json
import sys

from confluent_kafka import ShareConsumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    sys.stdout.write(json.dumps({"subscribed": True}) + "\n")
    sys.stdout.flush()
    held = 0
    while not held:
        for m in c.poll(0.1):
            if m.error() is None:
                held += 1
                sys.stdout.write(json.dumps({"offset": m.offset(),
                                             "delivery_count": m.delivery_count()}) + "\n")
                sys.stdout.flush()
    sys.stdin.read()  # hold the records, unacknowledged, until killed

if __name__ == "__main__":
    main()
