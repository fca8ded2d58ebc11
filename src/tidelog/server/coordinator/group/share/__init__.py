"""KIP-932 share groups ("queues"): members share partitions, records are acquired under a
time-limited lock and acknowledged one by one.

* ``partition``: a share-partition's in-flight records (Kafka's SharePartition).
* ``coordinator``: ShareGroupHeartbeat membership, share sessions, the share-partitions.
* ``fetcher``: one partition's part of a ShareFetch (read, acquire, answer the batches).
* ``durable``, ``persister``: the share-partitions' states written to and read from the share
  coordinator (``coordinator/share``; Kafka's DefaultStatePersister).
"""
