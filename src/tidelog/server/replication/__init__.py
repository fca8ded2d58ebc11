"""Follower replication (Kafka's ReplicaFetcherManager, ReplicaFetcherThread, LeaderEndPoint)
and the leader's AlterPartition sender. Arrows: ``replication`` -> ``cluster``, ``client``."""
