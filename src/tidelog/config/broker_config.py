"""Broker configuration (Kafka's KafkaConfig subset): names and defaults as in Kafka.

``BrokerConfig.from_props(props)`` parses a ``server.properties`` mapping; unknown keys are
kept (Kafka warns and ignores them) so existing files load. ``log_config_defaults()`` maps
the broker-level ``log.*`` keys to topic-level names (``log.segment.bytes`` ->
``segment.bytes``) as the broker defaults a topic's overrides sit on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core import INT_MAX, LONG_MAX, ConfigDef, ConfigError, at_least, between, one_of
from .log_config import resolve_broker_defaults

BROKER_CONFIG_DEF = ConfigDef()
_d = BROKER_CONFIG_DEF.define
_d(
    "listeners",
    "list",
    "PLAINTEXT://localhost:9092",
    "Listener URIs NAME://host:port; every listener is served.",
)
_d(
    "advertised.listeners",
    "list",
    None,
    "Listeners given to clients in Metadata; defaults to `listeners`.",
)
_d("node.id", "int", 1, "The broker's node id (single-node cluster).", at_least(0))
_d("broker.id", "int", None, "Legacy alias of node.id.")
_d("cluster.id", "string", None, "Cluster id; generated and stored in meta.properties when unset.")
_d("log.dirs", "list", None, "Log directories; defaults to `log.dir`.")
_d("log.dir", "string", "/tmp/kafka-logs", "The log directory used when log.dirs is unset.")
_d("num.partitions", "int", 1, "Default partition count of auto-created topics.", at_least(1))
_d(
    "auto.create.topics.enable",
    "boolean",
    True,
    "Create a topic on Metadata/Produce for an unknown name.",
)
_d(
    "default.replication.factor",
    "int",
    1,
    "Replication factor of auto-created topics.",
    at_least(1),
)
_d("delete.topic.enable", "boolean", True, "Allow DeleteTopics.")
_d("message.max.bytes", "int", 1048588, "Largest record batch size allowed.", at_least(0))
_d("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted.", at_least(1))
_d(
    "min.insync.replicas",
    "int",
    1,
    "Minimum ISR for acks=all (a partition with fewer in-sync replicas refuses acks=all).",
    at_least(1),
)
_d(
    "max.incremental.fetch.session.cache.slots",
    "int",
    1000,
    "Incremental fetch sessions kept (KIP-227); 0 disables them.",
    at_least(0),
)
_d("fetch.max.bytes", "int", 57671680, "Largest Fetch response the broker builds.", at_least(1024))
_d("quota.window.num", "int", 11, "Samples kept for client quota rates.", at_least(1))
_d("quota.window.size.seconds", "int", 1, "Length of each client quota sample.", at_least(1))
_d("replication.quota.window.num", "int", 11, "Samples kept for replication quota rates.",
   at_least(1))
_d("replication.quota.window.size.seconds", "int", 1, "Length of each replication quota sample.",
   at_least(1))
_d("leader.replication.throttled.rate", "long", 2**63 - 1,
   "Bytes/s leaders send to throttled follower replicas (dynamic).", at_least(0))
_d("follower.replication.throttled.rate", "long", 2**63 - 1,
   "Bytes/s followers fetch for throttled replicas (dynamic).", at_least(0))
_d(
    "producer.id.expiration.ms",
    "int",
    86400000,
    "Idle time after which producer state expires.",
    at_least(1),
)
_d(
    "transactional.id.expiration.ms",
    "int",
    604800000,
    "Idle time after which a transactional id expires.",
    at_least(1),
)
_d("log.segment.bytes", "int", 1073741824, "Maximum segment size.", at_least(14))
_d("log.roll.ms", "long", None, "Roll a segment after this time.")
_d("log.roll.hours", "int", 168, "Roll a segment after this many hours.", at_least(1))
_d("log.retention.ms", "long", None, "Delete segments older than this.")
_d("log.retention.minutes", "int", None, "Retention in minutes.")
_d("log.retention.hours", "int", 168, "Retention in hours.")
_d("log.retention.bytes", "long", -1, "Retention by size per partition.")
_d("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", at_least(1))
_d("log.cleanup.policy", "list", "delete", "delete and/or compact.")
_d("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries.", at_least(0))
_d("log.index.size.max.bytes", "int", 10485760, "Maximum index file size.", at_least(4))
_d("log.flush.interval.messages", "long", LONG_MAX, "Flush after this many messages.", at_least(1))
_d("log.flush.interval.ms", "long", None, "Flush after this time.")
_d(
    "log.message.timestamp.type",
    "string",
    "CreateTime",
    "CreateTime or LogAppendTime.",
    one_of("CreateTime", "LogAppendTime"),
)
_d(
    "log.message.timestamp.before.max.ms",
    "long",
    LONG_MAX,
    "Max age of a record timestamp.",
    at_least(0),
)
_d(
    "log.message.timestamp.after.max.ms",
    "long",
    3600000,
    "Max future skew of a record timestamp.",
    at_least(0),
)
_d("log.preallocate", "boolean", False, "Preallocate segment files.")
_d("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio that makes a log cleanable.")
_d("log.cleaner.delete.retention.ms", "long", 86400000, "How long delete tombstones are kept.")
_d("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age before compaction.")
_d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum age before compaction.")
_d("log.segment.delete.delay.ms", "long", 60000, "Delay before a deleted segment's files go.")
_d(
    "compression.type",
    "string",
    "producer",
    "Broker-side compression (producer keeps the codec).",
    one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
)
_d(
    "queued.max.requests",
    "int",
    500,
    "Requests in flight per connection before reads pause.",
    between(1, INT_MAX),
)
_d("connections.max.idle.ms", "long", 600000, "Idle connections are closed after this.")
def _http_urls(name: str, urls: Any) -> None:
    from urllib.parse import urlsplit

    for url in urls or []:
        try:
            parts = urlsplit(url)
            ok = parts.scheme == "http" and parts.hostname is not None and parts.port is not None
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(name, url, "expected http://host:port")


_d(
    "http.listeners",
    "list",
    "",
    "HTTP listener for /metrics, /healthz, /readyz and the web console "
    "(e.g. `http://127.0.0.1:9644`); empty: off.",
    _http_urls,
)
_d("http.console.enable", "boolean", True, "Serve the web console on the HTTP listener.")
_d(
    "http.console.admin.enable",
    "boolean",
    False,
    "Allow the console's admin actions (create topic, alter config, reset offsets); "
    "read-only when false.",
)
_d(
    "http.console.lag.sample.interval.ms",
    "long",
    5000,
    "How often the console samples consumer group lag for its charts.",
    at_least(1),
)
_d(
    "http.console.lag.history.ms",
    "long",
    600000,
    "How much lag history the console keeps and draws.",
    at_least(1),
)


def _registry_urls(name: str, urls: Any) -> None:
    from urllib.parse import urlsplit

    for url in urls or []:
        try:
            parts = urlsplit(url)
            ok = parts.scheme in ("http", "https") and parts.hostname is not None
            ok = ok and parts.port is not None
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(name, url, "expected http://host:port or https://host:port")


# the schema registry (Confluent Schema Registry's keys under schema.registry.)
_d(
    "schema.registry.listeners",
    "list",
    "",
    "Schema Registry REST listener, Confluent's API at the root path "
    "(e.g. `http://127.0.0.1:8081`); empty: off.",
    _registry_urls,
)
_d("schema.registry.kafkastore.topic", "string", "_schemas", "The registry's compacted topic.")
_d(
    "schema.registry.kafkastore.timeout.ms",
    "int",
    500,
    "How long a registry write waits for its record to be written and read back.",
    at_least(1),
)
_d(
    "schema.registry.schema.compatibility.level",
    "string",
    "backward",
    "Default compatibility level: none, backward, backward_transitive, forward, "
    "forward_transitive, full, full_transitive.",
    one_of(
        "none", "backward", "backward_transitive", "forward", "forward_transitive", "full",
        "full_transitive", case_sensitive=False,
    ),
)
_d(
    "schema.registry.group.id",
    "string",
    "schema-registry",
    "Consumer group in which the registries of a cluster elect their leader (Confluent's "
    "schema.registry.group.id); a one-broker cluster's registry leads alone.",
)
_d(
    "schema.registry.leader.eligibility",
    "boolean",
    True,
    "Whether this broker's registry may become the leader (Confluent's leader.eligibility).",
)
_d(
    "schema.registry.authentication.method",
    "string",
    "NONE",
    "NONE, or BASIC: HTTP basic auth checked against the broker's SCRAM users "
    "(Confluent's authentication.method).",
    one_of("NONE", "BASIC", case_sensitive=False),
)
# security (Kafka's names; listener.name.<listener>.<key> overrides any of them per listener)
_d(
    "listener.security.protocol.map",
    "list",
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    "Listener name to security protocol.",
)
_d("ssl.keystore.type", "string", "PEM", "Only PEM keystores are read.", one_of("PEM"))
_d("ssl.keystore.location", "string", None, "PEM file with the private key and its chain.")
_d("ssl.keystore.certificate.chain", "password", None, "Inline PEM certificate chain.")
_d("ssl.keystore.key", "password", None, "Inline PEM private key.")
_d("ssl.key.password", "password", None, "Password of an encrypted private key.")
_d("ssl.truststore.type", "string", "PEM", "Only PEM truststores are read.", one_of("PEM"))
_d("ssl.truststore.location", "string", None, "PEM file of trusted CA certificates.")
_d("ssl.truststore.certificates", "password", None, "Inline PEM trusted certificates.")
_d(
    "ssl.client.auth",
    "string",
    "none",
    "Client certificates: none, requested or required.",
    one_of("none", "requested", "required"),
)
_d("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions accepted.")
_d("ssl.cipher.suites", "list", "", "OpenSSL cipher names; empty keeps the defaults.")
_d("ssl.principal.mapping.rules", "string", "DEFAULT", "Certificate DN to principal name.")
_d("sasl.enabled.mechanisms", "list", "GSSAPI", "SASL mechanisms offered.")
_d(
    "sasl.server.max.receive.size",
    "int",
    524288,
    "Largest frame accepted before authentication.",
    at_least(1),
)
_d(
    "connection.failed.authentication.delay.ms",
    "int",
    100,
    "Delay before answering and closing a failed authentication.",
    at_least(0),
)
_d("connections.max.reauth.ms", "long", 0, "SASL session lifetime (KIP-368); 0 = unlimited.")
_d("authorizer.class.name", "string", "", "StandardAuthorizer (or AclAuthorizer) enables ACLs.")
_d("super.users", "string", "", "Principals allowed everything, separated by ';'.")
_d(
    "allow.everyone.if.no.acl.found",
    "boolean",
    False,
    "Allow access to a resource no ACL matches.",
)


# cluster (Kafka's ZooKeeper mode; without zookeeper.connect the broker is a one-broker cluster)
_d(
    "zookeeper.connect",
    "string",
    None,
    "ZooKeeper hosts `host:port[,host:port...][/chroot]`; set, the broker joins that cluster.",
)
_d("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout.", at_least(1))
_d(
    "zookeeper.connection.timeout.ms",
    "int",
    None,
    "Longest wait to connect to ZooKeeper; unset: zookeeper.session.timeout.ms.",
)
_d("zookeeper.max.in.flight.requests", "int", 10, "ZooKeeper requests in flight.", at_least(1))
_d("broker.rack", "string", None, "Rack of this broker, used by rack-aware placement.")
_d(
    "replica.selector.class",
    "string",
    None,
    "The replica a consumer fetches from (KIP-392): "
    "org.apache.kafka.common.replica.RackAwareReplicaSelector picks one in the consumer's "
    "client.rack; unset, consumers fetch from leaders.",
    one_of("org.apache.kafka.common.replica.RackAwareReplicaSelector"),
)
_d(
    "inter.broker.listener.name",
    "string",
    None,
    "Listener brokers use to talk to each other; unset: security.inter.broker.protocol's.",
)
_d(
    "security.inter.broker.protocol",
    "string",
    "PLAINTEXT",
    "Security protocol between brokers (names the listener when inter.broker.listener.name "
    "is unset).",
    one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
)
_d(
    "sasl.mechanism.inter.broker.protocol",
    "string",
    "GSSAPI",
    "SASL mechanism brokers use with each other on a SASL inter-broker listener.",
)
_d("offsets.topic.replication.factor", "short", 3, "Replication of __consumer_offsets.", at_least(1))
_d(
    "transaction.state.log.replication.factor",
    "short",
    3,
    "Replication of __transaction_state.",
    at_least(1),
)
_d("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state.", at_least(1))
_d(
    "unclean.leader.election.enable",
    "boolean",
    False,
    "Elect a replica outside the ISR when no ISR member is alive (may lose data).",
)
_d("auto.leader.rebalance.enable", "boolean", True, "Move leadership back to preferred replicas.")
_d(
    "leader.imbalance.check.interval.seconds",
    "long",
    300,
    "How often the controller checks leader imbalance.",
    at_least(1),
)
_d(
    "leader.imbalance.per.broker.percentage",
    "int",
    10,
    "Imbalance ratio per broker above which a preferred election runs.",
    at_least(0),
)
_d("controlled.shutdown.enable", "boolean", True, "Move leadership off a stopping broker first.")
_d("controlled.shutdown.max.retries", "int", 3, "ControlledShutdown attempts.", at_least(0))
_d("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait between attempts.", at_least(0))
_d("controller.socket.timeout.ms", "int", 30000, "Controller to broker request timeout.", at_least(0))
# replication (follower fetching and ISR management)
_d("replica.lag.time.max.ms", "long", 30000, "A follower behind this long leaves the ISR.", at_least(1))
_d(
    "tidelog.log.append.writer.enable",
    "boolean",
    True,
    "Produce appends write their segment bytes on a writer thread per log dir (in order, "
    "the log end offset moving once written) so the event loop keeps reading sockets; "
    "false: written on the event loop.",
)
_d(
    "tidelog.log.append.writer.inline.bytes",
    "int",
    1 << 20,
    "With the writer thread on: a produce append smaller than this, to a partition with no "
    "write in flight, is written on the event loop (handing it over costs more than the "
    "page-cache copy; bench/baseline.py), as long as the bytes its Produce request writes "
    "there, over all its partitions, stay within this size. Appends of 1 MiB and more are validated and "
    "written on a worker thread either way.",
    at_least(0),
)
_d("num.replica.fetchers", "int", 1, "Fetcher tasks per source broker.", at_least(1))
_d("replica.fetch.max.bytes", "int", 1048576, "Bytes fetched per partition.", at_least(0))
_d("replica.fetch.min.bytes", "int", 1, "Bytes a follower fetch waits for.", at_least(1))
_d("replica.fetch.wait.max.ms", "int", 500, "Longest wait of a follower fetch.", at_least(0))
_d("replica.fetch.backoff.ms", "int", 1000, "Sleep after a follower fetch error.", at_least(0))
_d(
    "tidelog.replica.fetch.session.enable",
    "boolean",
    True,
    "Followers fetch through incremental fetch sessions (KIP-227), as Kafka's always do; "
    "false: every follower Fetch is sessionless and names every partition.",
)
_d(
    "replica.fetch.response.max.bytes",
    "int",
    10485760,
    "Bytes of a whole follower fetch response.",
    at_least(0),
)
_d("replica.socket.timeout.ms", "int", 30000, "Follower fetch socket timeout.")
_d(
    "replica.socket.receive.buffer.bytes",
    "int",
    65536,
    "Follower socket receive buffer.",
)
_d(
    "replica.high.watermark.checkpoint.interval.ms",
    "long",
    5000,
    "How often high watermarks are written to disk.",
    at_least(1),
)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, uri: str) -> Listener:
        try:
            name, rest = uri.split("://", 1)
            host, port = rest.rsplit(":", 1)
            return cls(name.upper(), host.strip("[]"), int(port))
        except ValueError:
            raise ConfigError("listeners", uri, "expected NAME://host:port") from None


def _protocol_map(entries: list[str]) -> dict[str, str]:
    protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        if not sep or protocol.upper() not in protocols:
            raise ConfigError("listener.security.protocol.map", entry, "expected NAME:PROTOCOL")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


class BrokerConfig:
    """Typed broker settings; attribute names are the Kafka names in snake_case."""

    def __init__(self, props: Mapping[str, Any] | None = None) -> None:
        self.originals: dict[str, Any] = dict(props or {})
        self.values = BROKER_CONFIG_DEF.parse(self.originals)
        listeners = [Listener.parse(u) for u in self.values["listeners"]]
        if not listeners:
            raise ConfigError("listeners", self.values["listeners"], "at least one listener")
        self.protocol_map = _protocol_map(self.values["listener.security.protocol.map"])
        names = [lst.name for lst in listeners]
        for lst in listeners:
            if lst.name not in self.protocol_map:
                raise ConfigError(
                    "listeners", lst.name, "not in listener.security.protocol.map"
                )
            if names.count(lst.name) > 1:
                raise ConfigError("listeners", lst.name, "each listener name must be unique")
        self.listeners = listeners
        self.listener = listeners[0]
        adv = [Listener.parse(u) for u in self.values["advertised.listeners"] or ()]
        # Kafka: a listener missing from advertised.listeners advertises its own address
        self.advertised = {lst.name: lst for lst in listeners} | {a.name: a for a in adv}
        self.advertised_listener = self.advertised[self.listener.name]
        if not self.advertised_listener.host:
            # Kafka: an empty host binds every interface and advertises the canonical name
            import socket

            self.advertised_listener = Listener(
                self.advertised_listener.name, socket.getfqdn(), self.advertised_listener.port
            )
            self.advertised[self.listener.name] = self.advertised_listener
        if self.advertised_listener.host in ("0.0.0.0", "::"):
            raise ConfigError(
                "advertised.listeners",
                self.advertised_listener.host,
                "cannot use the nonroutable meta-address (set advertised.listeners)",
            )
        if self.values["broker.id"] is not None and "node.id" not in self.originals:
            self.values["node.id"] = self.values["broker.id"]

        self._check_cluster()

    def _check_cluster(self) -> None:
        # Kafka's KafkaConfig checks, applied when the broker joins a cluster
        if self.zookeeper_connect is None:
            if self.values["default.replication.factor"] > 1:
                # one broker holds one replica of a partition
                raise ConfigError(
                    "default.replication.factor",
                    self.values["default.replication.factor"],
                    "a broker without zookeeper.connect is a one-broker cluster: at most 1",
                )
            return
        if self.originals.get("inter.broker.listener.name") and self.originals.get(
            "security.inter.broker.protocol"
        ):
            raise ConfigError(
                "inter.broker.listener.name",
                self.values["inter.broker.listener.name"],
                "only one of inter.broker.listener.name and security.inter.broker.protocol "
                "may be set",
            )
        name = self.inter_broker_listener_name
        if name not in self.advertised:
            raise ConfigError(
                "inter.broker.listener.name", name, "must be a listener name in listeners"
            )
        if self.values["replica.fetch.wait.max.ms"] > self.values["replica.lag.time.max.ms"]:
            raise ConfigError(
                "replica.fetch.wait.max.ms",
                self.values["replica.fetch.wait.max.ms"],
                "should always be less than or equal to replica.lag.time.max.ms",
            )

    @property
    def zookeeper_connect(self) -> str | None:
        value = self.values["zookeeper.connect"]
        return str(value) if value else None

    @property
    def zookeeper_connection_timeout_ms(self) -> int:
        value = self.values["zookeeper.connection.timeout.ms"]
        return int(value if value is not None else self.values["zookeeper.session.timeout.ms"])

    @property
    def broker_rack(self) -> str | None:
        value = self.values["broker.rack"]
        return str(value) if value else None

    @property
    def inter_broker_listener_name(self) -> str:
        name = self.values["inter.broker.listener.name"]
        if name:
            return str(name).upper()
        return str(self.values["security.inter.broker.protocol"])

    @property
    def inter_broker_listener(self) -> Listener:
        """The advertised address other brokers (and the controller) connect to."""
        return self.advertised[self.inter_broker_listener_name]

    def security_protocol(self, listener_name: str) -> str:
        return self.protocol_map[listener_name]

    def listener_value(self, listener_name: str, key: str) -> Any:
        """``listener.name.<listener>.<key>`` when set (Kafka's per-listener override), else
        the broker-wide ``key`` (parsed) or the raw original for keys not defined here."""
        override = self.originals.get(f"listener.name.{listener_name.lower()}.{key}")
        if override is not None:
            return override
        if key in self.values:
            return self.values[key]
        return self.originals.get(key)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> BrokerConfig:
        return cls(props)

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values")
        key = name.replace("_", ".")
        if values is not None and key in values:
            return values[key]
        raise AttributeError(name)

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    def log_config_defaults(self) -> dict[str, str]:
        """Broker-level log settings given explicitly, under topic config names (the
        defaults a topic's overrides sit on; unset keys keep Kafka's defaults)."""
        return {k: _fmt(v) for k, v in resolve_broker_defaults(self.originals).items()}
