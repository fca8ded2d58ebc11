"""Client quotas (Kafka's ClientQuotaManager, KIP-13/KIP-55/KIP-124/KIP-219): quota values
per user / client-id entity, stored and persisted (``store.py``), and byte-rate enforcement
with Kafka's sampled rate, throttle time and channel muting (``manager.py``)."""

from .manager import ClientQuotaManager, QuotaType
from .store import ClientQuotaStore, QuotaEntity, QuotaError

__all__ = ["ClientQuotaManager", "ClientQuotaStore", "QuotaEntity", "QuotaError", "QuotaType"]
