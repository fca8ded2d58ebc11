"""Groups: Kafka's classic group coordinator, KIP-848 consumer groups (``consumer/``), KIP-932
share groups (``share/``), ``__consumer_offsets`` and ``__share_group_state``.

Modules (Kafka counterpart in brackets):

* ``records``: key/value schemas of ``__consumer_offsets`` (OffsetCommitKey v0-1,
  OffsetCommitValue v0-4, GroupMetadataKey v2, GroupMetadataValue v0-4) and the group ->
  partition mapping (``abs(String.hashCode) % offsets.topic.num.partitions``).
* ``group`` / ``member``: GroupMetadata / MemberMetadata and the state enum.
* ``rebalance`` + ``offsets`` + ``coordinator``: GroupCoordinator (sans I/O; timers through a
  ``Scheduler``, time through a ``Clock``); ``coordinator.GroupCoordinator`` is the facade.
* ``metadata_manager``: GroupMetadataManager (cache, writes, load, offset expiry).
* ``pending_offsets``: offsets of open transactions and the load-time rules for transactional
  batches (low: it knows offsets and batches, no group kind); ``txn_offsets``:
  TxnOffsetCommit and the transaction markers' completion on top of the coordinator.
* ``store``: the storage port (``OffsetsStore``) and an in-memory implementation;
  ``log_store``: the port over the broker's logs (``__consumer_offsets`` created lazily,
  compacted).
* ``config``: ``group.*`` / ``offsets.*`` broker settings with Kafka's defaults.
* ``shard``: the coordinator on the coordinator runtime (``server/coordinator``): loads
  and unloads of ``__consumer_offsets`` partitions as leadership moves.
* ``wiring``: the asyncio side (``start_group_coordinator(broker)``,
  ``stop_group_coordinator(broker)``, ``coordinator_for(broker)``).

The API handlers live in ``tidelog/server/handlers/`` (find_coordinator, join_group,
sync_group, heartbeat, leave_group, offset_commit, offset_fetch, offset_delete, list_groups,
describe_groups, delete_groups, consumer_group_heartbeat, consumer_group_describe,
share_group_heartbeat, share_group_describe, share_fetch, share_acknowledge). They start the coordinator on first use; the broker may
call ``start_group_coordinator(self)`` after its replica manager starts and
``stop_group_coordinator(self)`` before it shuts down, so loading begins at startup and no
timer outlives the logs.
"""
