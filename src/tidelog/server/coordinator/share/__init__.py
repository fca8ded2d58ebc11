"""The share coordinator (KIP-932; Kafka's share-coordinator module): the durable state of
share-partitions in ``__share_group_state``, a shard of the coordinator runtime beside the
group and transaction coordinators.

* ``records``: ShareSnapshot / ShareUpdate keys and values, byte for byte Kafka's.
* ``state_coordinator``: the states, their writes and loads (Kafka's ShareCoordinatorShard).
* ``uncommitted``: in a cluster, the writes not yet replicated.
* ``shard``: the runtime's shard over it (load on leadership, forget on its loss).
* ``wiring``: its start over a store, its registration with the runtime, its stop.

The share groups themselves (membership, share-partitions, the persister that writes to this
coordinator) are the group coordinator's (``coordinator/group/share``).
"""
