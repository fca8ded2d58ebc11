"""The coordinators on one runtime (Kafka's coordinator-common): ``runtime`` loads and
unloads the partitions of the internal topics as this broker's leadership of them moves, and
hands each batch to the coordinator shard registered for the topic; ``partition_writer``
appends their writes with acks=all and completes them once the ISR has them; ``timer``
runs each coordinator's timed operations on the loop. The coordinators register their shards
at start: the group coordinator (``group/``, ``__consumer_offsets``), the share coordinator
(``share/``, ``__share_group_state``) and the transaction coordinator (``transaction/``,
``__transaction_state``). ``record_codec`` holds their records' primitives, ``store`` the
port their state is read from and written to."""
