"""tidelog: a Kafka-compatible log broker in Python."""

__version__ = "0.1.0"
