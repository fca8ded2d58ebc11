"""KIP-848 consumer groups: the broker assigns, members reconcile incrementally.

* ``records``: the ``__consumer_offsets`` record types of Kafka 4.x consumer groups (keys 3-8).
* ``group``: ConsumerGroup / ConsumerGroupMember and ``replay`` (record -> state).
* ``assignor``: the server-side assignors ``uniform`` and ``range``.
* ``reconcile``: Kafka's CurrentAssignmentBuilder (revoke before reassigning).
* ``coordinator``: ConsumerGroupHeartbeat, session and rebalance timeouts, fencing.

Committed offsets of a consumer group live on it and go through the same manager, offsets
API and pending transactional offsets as a classic group's.
"""
