"""Tiered storage (KIP-405), the pure-storage half: remote storage managers (S3, a local
directory), remote log segment metadata, its wire format in ``__remote_log_metadata`` and the
cache built from it.

Mirrors Kafka's ``org.apache.kafka.server.log.remote.storage`` and Aiven's open-source
tiered-storage plugin. Nothing here knows leaders, replicas or the broker: the
RemoteLogManager (``tidelog.server.remote_log_manager``) drives these classes.
"""

# The remote index cache's folder in the first log dir (Kafka's RemoteIndexCache.DIR_NAME):
# here, so that the log manager skips it when loading without importing the cache.
INDEX_CACHE_DIR_NAME = "remote-log-index-cache"
