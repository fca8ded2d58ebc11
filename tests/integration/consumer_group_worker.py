"""A KIP-848 consumer-group member (confluent-kafka, ``group.protocol=consumer``) in its own
process, for test_consumer_group_confluent.py (no tests here).

    python consumer_group_worker.py BOOTSTRAP GROUP TOPIC

Writes one JSON line to stdout whenever its assignment changes: {"assigned": [partitions]}.
Runs until killed or stdin closes (then it leaves the group).
"""

from __future__ import annotations

import json
import sys
import threading

import confluent_kafka


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "group.protocol": "consumer"})
    c.subscribe([topic])
    last: list[int] | None = None
    while not stop.is_set():
        c.poll(0.05)
        now = sorted(p.partition for p in c.assignment())
        if now != last:
            sys.stdout.write(json.dumps({"assigned": now}) + "\n")
            sys.stdout.flush()
            last = now
    c.close()


if __name__ == "__main__":
    main()
