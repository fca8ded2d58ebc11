"""The broker's key table (Kafka's KafkaConfig definitions: ServerConfigs, ServerLogConfigs,
SocketServerConfigs, ReplicationConfigs, ZkConfigs...): each key once, with its type, default,
validator and doc. Parsing and the cross-key checks live in ``broker_config``.
"""

from __future__ import annotations

from typing import Any

from .core import INT_MAX, LONG_MAX, ConfigDef, ConfigError, at_least, between, one_of

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


def _buffer_size(name: str, v: Any) -> None:
    """-1 leaves the OS its default; any other size must be positive (Java's
    setSendBufferSize, which Kafka calls with it, refuses 0 and below)."""
    if v is not None and v != -1 and v < 1:
        raise ConfigError(name, v, "Value must be -1 (the OS default) or at least 1")


_d("socket.send.buffer.bytes", "int", 102400,
   "The SO_SNDBUF buffer of the socket server sockets. If the value is -1, the OS default "
   "will be used.", _buffer_size)
_d("socket.receive.buffer.bytes", "int", 102400,
   "The SO_RCVBUF buffer of the socket server sockets. If the value is -1, the OS default "
   "will be used.", _buffer_size)


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
