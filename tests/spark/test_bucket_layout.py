"""The bucket's layout and the choice of segment copies (remote_layout.py), and the options
of a read on a bucket (remote_options.py): pure Python, no Spark, no S3."""

from __future__ import annotations

import pytest

from tidelog.spark.options import OptionError, parse_read_options
from tidelog.spark.remote_layout import choose_slices, group_objects
from tidelog.spark.remote_options import remote_configs

TID = "MWJ6FHTfRYy67jzwZdeqSQ"
IDS = ["AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCCCCCCCC", "DDDDDDDDDDDDDDDDDDDDDD"]
FULL = ("log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint")
CREDS = {"rsm.config.storage.aws.access.key.id": "id", "rsm.config.storage.aws.secret.access.key": "secret"}


def _keys(base: int, sid: str, suffixes: tuple[str, ...], topic: str = "my-topic", tid: str = TID) -> list[tuple[str, int]]:
    return [(f"p/{topic}-{tid}/0/{base:020d}-{sid}.{s}", 100) for s in suffixes]


def test_group_objects_parses_keys_and_ignores_others() -> None:
    listing = [*_keys(0, IDS[0], FULL), *_keys(0, IDS[1], ("index",)), ("p/notes.txt", 3),
               ("other/my-topic-" + TID + "/0/" + "0" * 20 + "-" + IDS[2] + ".log", 5)]
    groups = group_objects(listing, "p/")
    [(tp, segs)] = groups.items()
    assert (tp.topic, tp.partition) == ("my-topic", 0)
    assert [(s.segment_id, s.complete, s.log_size) for s in segs] == [(IDS[0], True, 100), (IDS[1], False, 0)]
    assert segs[0].stem == f"p/my-topic-{TID}/0/{0:020d}-{IDS[0]}"


def test_a_topic_under_two_ids_is_an_error() -> None:
    listing = [*_keys(0, IDS[0], FULL), *_keys(0, IDS[1], FULL, tid="ZZZZZZZZZZZZZZZZZZZZZZ")]
    with pytest.raises(OptionError, match="more than one topic id"):
        group_objects(listing, "p/")


def test_choose_slices_reads_each_offset_once() -> None:
    listing = [*_keys(0, IDS[3], FULL), *_keys(0, IDS[0], ("log",)),  # partial copy, smaller id
               *_keys(100, IDS[1], FULL), *_keys(100, IDS[2], FULL),  # re-upload of one segment
               *_keys(150, IDS[0], FULL)]  # a longer segment of a later leader
    segs = next(iter(group_objects(listing, "p/").values()))
    ends = {(0, IDS[3]): 99, (0, IDS[0]): 120, (100, IDS[1]): 199, (100, IDS[2]): 199, (150, IDS[0]): 260}
    slices = choose_slices([(s, ends[(s.base_offset, s.segment_id)]) for s in segs])
    assert [(s.stem[-22:], s.first, s.last) for s in slices] == [
        (IDS[3], 0, 99),  # complete beats partial at the same base
        (IDS[0], 100, 120),  # the partial copy's offsets above the complete one's
        (IDS[1], 121, 199),  # same base and end: the smaller id
        (IDS[0], 200, 260),
    ]
    covered = [o for s in slices for o in range(s.first, s.last + 1)]
    assert covered == list(range(261))


def test_remote_configs_from_path_and_both_spellings() -> None:
    configs = dict(remote_configs(("s3://b/cluster-a/",), {**CREDS, "fs.s3a.endpoint": "http://h:1"}))
    assert configs["storage.s3.bucket.name"] == "b" and configs["key.prefix"] == "cluster-a/"
    assert configs["storage.s3.endpoint.url"] == "http://h:1"
    assert dict(remote_configs(("s3://b",), CREDS))["key.prefix"] == ""
    with pytest.raises(OptionError, match="contradict"):
        remote_configs(("s3://b/x",), {**CREDS, "rsm.config.storage.s3.bucket.name": "c"})
    with pytest.raises(OptionError, match="contradict each other"):
        remote_configs(("s3://b/x",), {**CREDS, "fs.s3a.access.key": "other"})
    with pytest.raises(OptionError, match="names no bucket"):
        remote_configs(("s3:///x",), CREDS)


def test_read_options_of_a_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    opts = parse_read_options({"path": "s3://b/p", "subscribe": "t", "kafka.bootstrap.servers": "h:9",
                               "remoteLogMetadata": "true", **CREDS}, streaming=False)
    assert opts.mode == "bucket" and opts.remote_log_metadata and opts.bootstrap_servers == "h:9"
    with pytest.raises(OptionError, match="it needs path=s3"):
        parse_read_options({"path": "s3://b/p", "subscribe": "t", "remoteLogMetadata": "true", **CREDS},
                           streaming=False)
    with pytest.raises(OptionError, match="needs S3 credentials"):
        parse_read_options({"path": "s3://b/p", "subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="contradict each other"):  # a local path and a broker
        parse_read_options({"path": "/data", "subscribe": "t", "kafka.bootstrap.servers": "h:9"}, streaming=False)
