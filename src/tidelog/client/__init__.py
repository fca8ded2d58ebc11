"""Our own small Kafka client (Kafka's clients, above the sans-I/O ``protocol`` layer): a
synchronous socket client with TLS/SASL whose fetches return raw record batches, which the
Spark reader decodes column by column, and ``pipelined``, the batch sender of ``tidelog perf
produce``. Everything else (the CLI, the Spark writer) runs on librdkafka through
confluent-kafka."""
