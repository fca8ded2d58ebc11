"""`tidelog reassign`'s pure parts against Kafka's ReassignPartitionsCommand: the JSON formats,
the rack-unaware proposal of --generate, and the throttled-replica lists of --execute."""

from __future__ import annotations

import json
import random

import pytest

from tidelog.cli.reassign_admin import (
    ReassignError,
    Reassignment,
    assign_replicas,
    format_reassignment,
    parse_reassignment,
    parse_topics_to_move,
    throttled_replicas,
)
from tidelog.util.topic_partition import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_reassignment_json_round_trip() -> None:
    text = format_reassignment({A1: [3, 1], A0: [1, 2]})
    assert json.loads(text) == {"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
    ]}  # fmt: skip
    assert parse_reassignment(text) == [(A0, [1, 2]), (A1, [3, 1])]
    # log_dirs may be left out, as Kafka's tool allows
    assert parse_reassignment('{"partitions":[{"topic":"b","partition":0,"replicas":[2]}]}') == [(B0, [2])]
    assert parse_topics_to_move('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]


@pytest.mark.parametrize("text, message", [
    ('{"version":2,"partitions":[]}', "Not supported version"),
    ('{"version":1,"partitions":[]}', "cannot be empty"),
    ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,1]}]}', "duplicate entries"),
    ('{"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}',
     "duplicate topic partitions"),
    ('{"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}', "Size of replicas list"),
    ("not json", "Unable to parse"),
])  # fmt: skip
def test_bad_reassignment_json(text: str, message: str) -> None:
    with pytest.raises(ReassignError, match=message):
        parse_reassignment(text)


def test_generate_spreads_leaders_and_replicas() -> None:
    got = assign_replicas([1, 2, 3], 6, 2, random.Random(7))
    assert sorted(got) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in got.values())
    leaders = [r[0] for r in got.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # each broker leads its share
    with pytest.raises(ReassignError, match="larger than available brokers"):
        assign_replicas([1, 2], 1, 3)


def test_throttles_name_sources_as_leaders_and_new_replicas_as_followers() -> None:
    current = {B0: Reassignment((3, 4, 1), (3, 4), (1,))}  # already moving from [1] to [3, 4]
    leaders, followers, brokers = throttled_replicas(current, {A0: [2, 3], A1: [1, 2]}, {A0: [1, 2], A1: [1, 2]})
    assert leaders == {"a": "0:1,0:2,1:1,1:2", "b": "0:1"}
    assert followers == {"a": "0:3", "b": "0:3,0:4"}
    assert brokers == {1, 2, 3, 4}
