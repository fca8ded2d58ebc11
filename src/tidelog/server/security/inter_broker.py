"""How this broker connects to the others (replica fetchers, the share state persister, the
transaction markers, the controller's requests): the client side of the inter-broker
listener."""

from __future__ import annotations

import re

from tidelog.client.security import ClientSecurity
from tidelog.config.broker_config import BrokerConfig

_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"([^"]*)"')


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to others: the inter-broker listener's protocol, its trust
    store, and for SASL ``sasl.mechanism.inter.broker.protocol`` with the credentials of the
    listener's JAAS config (Kafka's ``listener.name.<l>.<mechanism>.sasl.jaas.config``)."""
    name = config.inter_broker_listener_name
    protocol = config.security_protocol(name)
    mechanism = str(config.values["sasl.mechanism.inter.broker.protocol"])
    prefix = f"listener.name.{name.lower()}."
    jaas = (config.originals.get(f"{prefix}{mechanism.lower()}.sasl.jaas.config")
            or config.originals.get(f"{prefix}sasl.jaas.config")
            or config.originals.get("sasl.jaas.config") or "")  # fmt: skip
    found = dict(_JAAS_OPTION.findall(str(jaas)))
    truststore = config.listener_value(name, "ssl.truststore.location")
    return ClientSecurity(
        security_protocol=protocol,
        sasl_mechanism=mechanism if protocol.startswith("SASL_") else "GSSAPI",
        sasl_username=found.get("username"),
        sasl_password=found.get("password"),
        ssl_cafile=str(truststore) if truststore else None,
        ssl_check_hostname=False,
    )
