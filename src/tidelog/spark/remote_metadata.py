"""The segments ``__remote_log_metadata`` says are copied (option ``remoteLogMetadata``).

Kafka's TopicBasedRemoteLogMetadataManager keeps every remote segment's state in that
internal topic: COPY_SEGMENT_STARTED when a copy begins, COPY_SEGMENT_FINISHED when all its
files are in the bucket, DELETE_SEGMENT_* when retention removes it. A reader of the bucket
that can reach a broker reads the whole topic (it is small: a few records per segment) and
keeps the latest state of each segment copy, as Kafka's RemoteLogMetadataCache does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tidelog.client.kafka_client import KafkaClient
from tidelog.client.kafka_client import TopicPartition as WireTP
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    uuid_to_str,
)
from tidelog.storage.remote.metadata_serde import RemoteLogMetadataSerdeError, deserialize

from .options import OptionError

REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"


@dataclass(frozen=True)
class FinishedSegment:
    """A segment copy whose latest state is COPY_SEGMENT_FINISHED."""

    start_offset: int
    end_offset: int


def _apply(states: dict[uuid.UUID, tuple[RemoteLogSegmentState, int, int]], value: bytes) -> None:
    record = deserialize(value)
    if isinstance(record, RemoteLogSegmentMetadata):
        states[record.remote_log_segment_id.id] = (record.state, record.start_offset, record.end_offset)
    elif isinstance(record, RemoteLogSegmentMetadataUpdate):
        sid = record.remote_log_segment_id.id
        if sid in states:
            _, start, end = states[sid]
            states[sid] = (record.state, start, end)
    elif isinstance(record, RemoteLogSegmentMetadataSnapshot):
        states[record.segment_id] = (record.state, record.start_offset, record.end_offset)


def finished_segments(client: KafkaClient) -> dict[str, FinishedSegment]:
    """Segment id (Kafka's Uuid string, as in the object keys) -> its offsets, for every
    copy whose latest state is COPY_SEGMENT_FINISHED."""
    parts = client.list_topics().get(REMOTE_LOG_METADATA_TOPIC)
    if not parts:
        raise OptionError(f"remoteLogMetadata=true, but the broker has no {REMOTE_LOG_METADATA_TOPIC} "
                          "topic (is remote.log.storage.system.enable on?)")
    tps = [WireTP(REMOTE_LOG_METADATA_TOPIC, p) for p in parts]
    earliest = client.earliest_offsets(tps)
    latest = {tp: o for tp, (o, _ts) in client.list_offsets(dict.fromkeys(tps, -1)).items()}
    states: dict[uuid.UUID, tuple[RemoteLogSegmentState, int, int]] = {}
    for tp in tps:
        for batch in client.iter_batches(tp, earliest[tp], latest[tp]):
            if batch.is_control:
                continue
            for rec in batch.iter_records():
                if rec.value is None:
                    continue
                try:
                    _apply(states, bytes(rec.value))
                except RemoteLogMetadataSerdeError as e:
                    raise RuntimeError(f"{tp.topic}-{tp.partition} offset {rec.offset}: {e}") from e
    return {uuid_to_str(sid): FinishedSegment(start, end)
            for sid, (state, start, end) in states.items()
            if state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED}
