"""``kafka.*`` options: each one is honoured or rejected with a clear error, never ignored.

Spark's Kafka connector hands every ``kafka.*`` option to the Java consumer or producer. The
tidelog source reads through its own columnar client and writes through librdkafka
(confluent-kafka's Producer), so each setting is mapped here explicitly:

* reads honour the settings that have a meaning for a Fetch/ListOffsets client and reject the
  rest (naming the ones that work);
* writes pass Java producer settings to librdkafka under librdkafka's name (most are spelled
  the same; ``max.request.size`` and ``buffer.memory`` are renamed/converted) and reject the
  ones librdkafka cannot honour the Java way (``partitioner.class``, JKS key stores...).
Pure Python (no pyspark, no confluent-kafka import) so it can be checked anywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

log = logging.getLogger("tidelog.spark")


class OptionError(ValueError):
    """A bad, unknown or contradictory option (raised while planning the query)."""


# Rejected on both sides, as Spark's connector does (it manages these itself).
FORBIDDEN = {
    "auto.offset.reset": "set the source option startingOffsets to 'earliest' or 'latest' instead",
    "key.deserializer": "keys are read as binary; cast the key column in the DataFrame",
    "value.deserializer": "values are read as binary; cast the value column in the DataFrame",
    "key.serializer": "cast the key column to string or binary",
    "value.serializer": "cast the value column to string or binary",
    "enable.auto.commit": "offsets live in Spark's checkpoint (see commitOffsetsToGroup)",
    "interceptor.classes": "interceptors can modify the payload and are not supported",
}
_SECURITY_PREFIXES = ("sasl.", "ssl.")
# TLS/SASL settings both sides honour (client/security.py reads Java's and
# librdkafka's names; PEM files only, no JKS/PKCS#12 stores, no GSSAPI/OAUTHBEARER)
SECURITY_HONOURED = {
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username", "sasl.password",
    "ssl.truststore.location", "ssl.ca.location", "ssl.keystore.location",
    "ssl.certificate.location", "ssl.key.location", "ssl.endpoint.identification.algorithm",
    "ssl.truststore.type", "ssl.keystore.type",  # PEM only
}
_SECURITY_REASON = (
    "not supported by the tidelog data source (TLS and SASL PLAIN/SCRAM work with PEM files: "
    + ", ".join("kafka." + n for n in sorted(SECURITY_HONOURED)) + ")"
)

# Reads: the settings a Fetch/ListOffsets client uses (see backend.BackendSpec).
READ_HONOURED = {
    "bootstrap.servers", "client.id", "request.timeout.ms", "isolation.level",
    "max.partition.fetch.bytes", "group.id",
} | SECURITY_HONOURED
_READ_INT = ("request.timeout.ms", "max.partition.fetch.bytes")

# Writes: Java producer names librdkafka accepts with the same meaning.
WRITE_PASSTHROUGH = {
    "bootstrap.servers", "client.id", "acks", "compression.type", "linger.ms", "batch.size",
    "enable.idempotence", "retries", "retry.backoff.ms", "request.timeout.ms",
    "delivery.timeout.ms", "max.in.flight.requests.per.connection",
}
_WRITE_INT = (
    "linger.ms", "batch.size", "retries", "retry.backoff.ms", "request.timeout.ms",
    "delivery.timeout.ms", "max.in.flight.requests.per.connection", "max.request.size",
    "buffer.memory",
)
WRITE_REJECTED = {
    "partitioner.class": (
        "the sink always uses Kafka's default partitioner (murmur2 of the key, like the Java "
        "producer); set the 'partition' column to choose partitions yourself"
    ),
}
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def _security(name: str, value: str) -> None:
    if name in ("ssl.truststore.type", "ssl.keystore.type") and value.strip().upper() != "PEM":
        raise OptionError(f"option kafka.{name}={value} is {_SECURITY_REASON}")
    if name.startswith(_SECURITY_PREFIXES) and name not in SECURITY_HONOURED:
        raise OptionError(f"option kafka.{name} is {_SECURITY_REASON}")


def client_security(kafka: Mapping[str, str]) -> Any:
    """The hand-written client's TLS/SASL configuration, checked now (OptionError if bad)."""
    from tidelog.client.security import ClientSecurity

    props = {k: v for k, v in kafka.items() if k in SECURITY_HONOURED}
    try:
        return ClientSecurity.from_properties(props)
    except ValueError as e:
        raise OptionError(f"kafka.* security options: {e}") from None


def _librdkafka_security(kafka: Mapping[str, str]) -> dict[str, str]:
    """Java-style security settings in librdkafka's names (jaas.config -> username/password,
    truststore/keystore PEM files -> ssl.*.location)."""
    sec = client_security(kafka)
    conf = {"security.protocol": sec.security_protocol.lower()}
    if sec.sasl:
        conf.update({"sasl.mechanism": sec.sasl_mechanism, "sasl.username": sec.sasl_username or "",
                     "sasl.password": sec.sasl_password or ""})
    if sec.tls:
        if sec.ssl_cafile:
            conf["ssl.ca.location"] = sec.ssl_cafile
        if sec.ssl_certfile:
            conf["ssl.certificate.location"] = sec.ssl_certfile
            conf["ssl.key.location"] = sec.ssl_keyfile or sec.ssl_certfile
        conf["ssl.endpoint.identification.algorithm"] = "https" if sec.ssl_check_hostname else "none"
    return conf


def _int(name: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f"option kafka.{name} must be an integer, got {value!r}") from None


def _common(name: str, value: str) -> None:
    if name in FORBIDDEN:
        raise OptionError(f"option kafka.{name} is not supported: {FORBIDDEN[name]}")
    _security(name, value)


def check_read_params(kafka: Mapping[str, str]) -> dict[str, str]:
    """The consumer-side ``kafka.*`` settings (names without the prefix), validated."""
    for name, value in kafka.items():
        _common(name, value)
        if name not in READ_HONOURED:
            raise OptionError(
                f"option kafka.{name} is not supported for reads (tidelog fetches raw batches "
                f"itself); supported: {', '.join('kafka.' + n for n in sorted(READ_HONOURED))}"
            )
        if name in _READ_INT:
            _int(name, value)
    level = kafka.get("isolation.level", "read_uncommitted").strip().lower()
    if level not in ("read_uncommitted", "read_committed"):
        raise OptionError(
            f"option kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}"
        )
    client_security(kafka)
    if "group.id" in kafka:
        # Spark warns too: a fixed group id is unsafe for concurrent queries. tidelog reads by
        # assignment and never joins the group, so it only names the reader.
        log.warning("kafka.group.id is set; the tidelog source reads by assignment and does not "
                    "join consumer group %r (use commitOffsetsToGroup to publish progress)",
                    kafka["group.id"])
    return dict(kafka)


def producer_config(kafka: Mapping[str, str]) -> dict[str, str | int | bool]:
    """librdkafka configuration for the sink's ``kafka.*`` options, as Spark would hand them
    to the Java producer. Raises OptionError for anything that cannot be honoured."""
    conf: dict[str, str | int | bool] = {
        "partitioner": "murmur2_random",  # the Java producer's default partitioner
        "enable.idempotence": True,
        "acks": "all",
    }
    for name, value in kafka.items():
        _common(name, value)
        if name in WRITE_REJECTED:
            raise OptionError(f"option kafka.{name} is not supported: {WRITE_REJECTED[name]}")
        if name in _WRITE_INT:
            _int(name, value)
        if name == "max.request.size":
            conf["message.max.bytes"] = _int(name, value)
        elif name == "buffer.memory":
            conf["queue.buffering.max.kbytes"] = max(1, _int(name, value) // 1024)
        elif name in SECURITY_HONOURED:
            continue  # translated below, all together
        elif name == "transactional.id":
            if not value.strip():
                raise OptionError("option kafka.transactional.id is empty")
            # a prefix: each Spark task gets its own id (txn_sink.py), so not in the shared conf
        elif name in WRITE_PASSTHROUGH:
            conf[name] = value.strip()
        else:
            supported = sorted(
                WRITE_PASSTHROUGH | SECURITY_HONOURED | {"max.request.size", "buffer.memory", "transactional.id"}
            )
            raise OptionError(
                f"option kafka.{name} is not supported for writes; supported: "
                + ", ".join("kafka." + n for n in supported)
            )
    conf.update(_librdkafka_security(kafka))
    _check_producer_values(conf, explicit_idempotence="enable.idempotence" in kafka)
    if "transactional.id" in kafka and not (conf["enable.idempotence"] and conf["acks"] == "all"):
        raise OptionError("kafka.transactional.id needs kafka.acks=all and idempotence (the Java producer's rule)")
    return conf


def _check_producer_values(conf: dict[str, str | int | bool], *, explicit_idempotence: bool) -> None:
    acks = str(conf["acks"]).lower()
    if acks not in ("all", "-1", "0", "1"):
        raise OptionError(f"option kafka.acks must be all, -1, 0 or 1, got {acks!r}")
    conf["acks"] = "all" if acks == "-1" else acks
    idem = str(conf["enable.idempotence"]).lower()
    if idem not in ("true", "false"):
        raise OptionError(f"option kafka.enable.idempotence must be true or false, got {idem!r}")
    if idem == "true" and conf["acks"] != "all":
        if explicit_idempotence:
            raise OptionError("kafka.enable.idempotence=true requires kafka.acks=all")
        idem = "false"  # the Java producer (3.x) turns its default idempotence off likewise
    conf["enable.idempotence"] = idem == "true"
    codec = str(conf.get("compression.type", "none")).lower()
    if codec not in COMPRESSIONS:
        raise OptionError(
            f"option kafka.compression.type must be one of {', '.join(COMPRESSIONS)}, got {codec!r}"
        )
    conf["compression.type"] = codec
