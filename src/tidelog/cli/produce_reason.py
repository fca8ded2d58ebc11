"""The broker's reason for a record it refused, which librdkafka does not pass on.

A broker that refuses a record as invalid (INVALID_RECORD, INVALID_TIMESTAMP) says why in its
ProduceResponse (``error_message`` and ``record_errors``: Kafka's "Compacted topic cannot
accept message without key in topic partition orders-0", a timestamp out of range, a value
that does not match its validated topic's schema). librdkafka reads that text but confluent-
kafka's delivery report carries only the code ("Broker: Broker failed to validate record"),
so ``tidelog produce`` sends the first refused record once more through tidelog's own protocol
client, which reads the whole response, and prints the broker's message.

The second attempt appends nothing the first did not: a refused batch is not written, and
these refusals depend on the record and the topic's configuration only. Should the topic have
changed in between (its cleanup.policy altered) and the record be accepted, it is written
once, as the user asked, and said so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the refusals a broker explains with a message (Kafka's LogValidator / record validators)
EXPLAINED = {87: "INVALID_RECORD", 32: "INVALID_TIMESTAMP"}


@dataclass
class Refused:
    """A record the broker refused, as its delivery report gave it back."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None


def refused(msg: Any) -> Refused:
    kind, ts = msg.timestamp()
    return Refused(msg.topic(), msg.partition(), msg.key(), msg.value(),
                   list(msg.headers() or []), ts if kind else None)


def broker_reason(conf: dict[str, Any], rec: Refused) -> str:
    """The broker's message for ``rec`` (sent again with tidelog's protocol client)."""
    from tidelog.client.conn import KafkaClientError
    from tidelog.client.kafka_client import KafkaClient
    from tidelog.client.producer import Producer
    from tidelog.client.security import ClientSecurity

    props = {k: str(v) for k, v in conf.items() if k.startswith(("security.", "sasl.", "ssl."))}
    try:
        with KafkaClient(str(conf["bootstrap.servers"]),
                         security=ClientSecurity.from_properties(props)) as client:
            producer = Producer(client, acks=-1, idempotent=False)
            producer.send(rec.topic, rec.value, rec.key, rec.headers, partition=rec.partition,
                          timestamp_ms=rec.timestamp_ms)
            producer.flush()
    except KafkaClientError as exc:
        return exc.message or f"{exc.error.name.upper()} (the broker gave no message)"
    except Exception as exc:  # the explanation is a courtesy: its own failure is one line
        return f"unknown (asking the broker again failed: {exc})"
    return "none: sent again, the record was accepted (the topic changed in between)"
