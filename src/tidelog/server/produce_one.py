"""The common Produce answered in one native call (_native/produce_now.c): librdkafka's one
partition of one topic, acks 1 or -1, a plain batch, at the leader of an ISR of this broker
alone, no quota, authorizer or record validator.

``ConnectionNow._take_one`` (connection_now.py) calls ``produce_one_now(broker,
connection_state, header, request)`` for a decoded Produce when the registry's handler is
handlers/produce.py's. It returns the answer's bytes; None when it declined before changing
anything (then the handler's ``handle_now`` answers, as it answers every Produce when this
path is off); or ``(partition, tp, outcome, phase)`` once it appended but left the end to
Python (``answer_one_rest``: an exception, a HW that did not move, an ISR to wait for).

Why native: at 1,000 partitions beside a busy process the produce->ack tail followed the
broker's CPU per request (docs/operations.md, goal 4, sittings F and G). The C reads and
sets the same attributes in the same order and calls the same Python methods on the same
paths as its twin, the path it stands for: ``handle_now``, ``ReplicaAppends.append_one_now``
and ``_append_async``, ``Log.append_plain_as_leader`` around the native append, and
``encode_produce_response``. It runs 15% fewer instructions a request than the twin; in
process that is about a tenth less CPU at one partition and little at 1,000, where what the
request reads cold sets its cost (sitting G). tests/server/test_produce_one.py runs the two
side by side and checks they answer byte for byte alike and leave the same logs and counts.

``produce_one_now`` is None (the twin answers) when the native core is not built or is
switched off (``TIDELOG_PURE_PYTHON``), when the native append is not the one bound, or
when ``TIDELOG_PRODUCE_ONE`` is ``0`` (this path alone off: bench/tail_latency.py's
``python-produce`` broker).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tidelog._native import core
from tidelog.metrics import BrokerTopicStats
from tidelog.protocol.fast import ProducePartitionResult, encode_produce_response
from tidelog.storage import log_plain
from tidelog.storage.log import Log
from tidelog.util.slotted import slotted_maker
from tidelog.util.topic_partition import TopicPartition

from .handlers.produce import answer_one_rest, handle_now
from .replica_appends import HEAVY_COMPRESSED_BYTES
from .replica_topics import INTERNAL_TOPICS

__all__ = ["answer_one_rest", "handle_now", "produce_one_now"]

PRODUCE_ONE_ENV = "TIDELOG_PRODUCE_ONE"

produce_one_now: Callable[[Any, Any, Any, Any], Any] | None = None
if core is not None and log_plain.append_plain is core.append_leader and \
        os.environ.get(PRODUCE_ONE_ENV, "") != "0":
    core.produce_now_bind(slotted_maker(TopicPartition), slotted_maker(ProducePartitionResult),
                          encode_produce_response, INTERNAL_TOPICS, Log, log_plain.append_plain,
                          HEAVY_COMPRESSED_BYTES, BrokerTopicStats.record_append)
    produce_one_now = core.produce_one_now
