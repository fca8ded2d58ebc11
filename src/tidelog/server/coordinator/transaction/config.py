"""Transaction coordinator settings: Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.config.core import ConfigDef, at_least

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig

TXN_CONFIG_DEF = (
    ConfigDef()
    .define("transaction.state.log.num.partitions", "int", 50,
            "Partitions of __transaction_state (do not change after deployment).", at_least(1))
    .define("transaction.state.log.segment.bytes", "int", 104857600,
            "Segment size of __transaction_state.", at_least(1))
    .define("transaction.state.log.load.buffer.size", "int", 5242880,
            "Read size used when loading __transaction_state.", at_least(1))
    .define("transaction.max.timeout.ms", "int", 900000,
            "Largest transaction.timeout.ms a producer may ask for.", at_least(1))
    .define("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
            "How often transactions past their timeout are aborted.", at_least(1))
    .define("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
            "How often expired transactional ids are removed.", at_least(1))
    .define("transaction.partition.verification.enable", "boolean", True,
            "Refuse transactional batches for partitions not added to the transaction.")
)


@dataclass(frozen=True)
class TxnConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_segment_bytes: int = 104857600
    transaction_state_log_load_buffer_size: int = 5242880
    transaction_max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3600000
    transaction_partition_verification_enable: bool = True
    transaction_state_log_min_isr: int = 2

    @classmethod
    def from_props(cls, props: Mapping[str, Any], **declared_elsewhere: Any) -> TxnConfig:
        """Typed settings from broker properties (unknown keys are ignored); keys the broker
        config declares itself (``transactional.id.expiration.ms``) come parsed, by name."""
        known = {k: v for k, v in props.items() if k in TXN_CONFIG_DEF}
        parsed = TXN_CONFIG_DEF.parse(known)
        fields = {k.replace(".", "_"): v for k, v in parsed.items()}
        return cls(**fields, **declared_elsewhere)

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TxnConfig:
        return cls.from_props(
            config.originals,
            transactional_id_expiration_ms=int(config.values["transactional.id.expiration.ms"]),
            transaction_state_log_min_isr=int(config.values["transaction.state.log.min.isr"]))
