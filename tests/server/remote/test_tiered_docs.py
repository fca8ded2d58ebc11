"""docs/tiered-storage.md as written: its server.properties (Aiven's plugin names) starts a
broker with tiered storage on (only the paths and the port are this test's), a tiered topic
created as the doc says is accepted, and its config tables are the declarations'."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tidelog.config.properties import load_properties
from tidelog.config.remote_log_config import REMOTE_LOG_CONFIG_DEF, RLMM_CONFIG_DEF
from tidelog.testing import EmbeddedBroker

DOC = Path(__file__).parents[3] / "docs" / "tiered-storage.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def test_the_documented_properties_start_a_tiered_broker(tmp_path: Path) -> None:
    props = load_properties(_blocks("properties")[0])
    assert props["remote.log.storage.manager.class.name"] == \
        "io.aiven.kafka.tieredstorage.RemoteStorageManager"
    (tmp_path / "remote").mkdir()
    props.update({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                  "rsm.config.storage.root": str(tmp_path / "remote")})
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as b:
        rlm = b.broker.remote_log_manager
        assert rlm is not None
        assert rlm.config.metadata_topic_replication_factor == 1
        cmd = _blocks("sh")[0]
        configs = dict(c.split("=", 1) for c in re.findall(r"--config (\S+)", cmd))
        rm = b.broker.replica_manager
        rm.validate_configs(configs)  # what CreateTopics checks
        assert configs["remote.storage.enable"] == "true"


def test_the_config_tables_are_the_declarations() -> None:
    text = DOC.read_text()
    assert REMOTE_LOG_CONFIG_DEF.docs_markdown() in text
    assert RLMM_CONFIG_DEF.docs_markdown() in text


def test_without_tiered_storage_no_manager_runs(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        assert b.broker.remote_log_manager is None


def test_a_missing_storage_root_stops_the_start(tmp_path: Path) -> None:
    props = load_properties(_blocks("properties")[0])
    props.update({"listeners": "PLAINTEXT://127.0.0.1:0",
                  "rsm.config.storage.root": str(tmp_path / "nowhere")})
    with pytest.raises(Exception, match="nowhere"):
        EmbeddedBroker(props, log_dir=tmp_path / "logs").start()
