"""A partition as the broker hosts it (Kafka's kafka.cluster): its registration and ISR state
(``partition_state``, pure), a follower as the leader sees it (``replica``), and ``Partition``
between the ReplicaManager and the log."""
