"""Transactions: Kafka's transaction coordinator and ``__transaction_state``.

Modules (Kafka counterpart in brackets):

* ``records``: TransactionLogKey v0 / TransactionLogValue v0-1 and the id -> partition map
  [TransactionLog]; ``format_record`` for ``dump-log --transaction-log-decoder``.
* ``metadata``: TransactionState and TransactionMetadata.
* ``state_manager``: the cache and its log [TransactionStateManager].
* ``coordinator``: InitProducerId, AddPartitions, EndTxn, timeouts, expiry, Describe/List
  [TransactionCoordinator]; markers through a writer the wiring provides
  [TransactionMarkerChannelManager, in-process on one node].
* ``config``: ``transaction.*`` broker settings with Kafka's defaults.
* ``wiring``: the asyncio side (start/stop, background load, timers, the marker writer).
"""
