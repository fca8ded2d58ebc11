"""The cluster controller (Kafka ZooKeeper mode's KafkaController): one broker at a time."""
