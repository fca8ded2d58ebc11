"""ZooKeeper, as Kafka's ZK mode keeps a cluster there (kafka.zk): the client
(``KafkaZkClient``), the znodes' formats byte for byte (``data``, ``kafka_json``), this
broker's registration and session (``registration``), the stores that mirror or write
znodes (topics, ACLs, SCRAM users, dynamic broker configs, client quotas, client metrics
subscriptions) and the one ``/config/changes`` listener that tells them what changed
(``change_notifications``). The only package that imports kazoo."""
