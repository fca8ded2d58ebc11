"""Configuration: Kafka's key names and defaults, declared once per key."""

from .core import LONG_MAX, ConfigDef, ConfigError, ConfigKey
from .properties import load_properties, read_properties_file

__all__ = [
    "LONG_MAX",
    "ConfigDef",
    "ConfigError",
    "ConfigKey",
    "load_properties",
    "read_properties_file",
]
