"""A log dir below its free-space floor shows on every operator surface: /metrics (free bytes,
floor, the dir's flag and the broker's), /readyz (still ready: reads and commits are served,
but ``degraded`` names the dir) and a banner on every console page; all clear once space is
back. The dir is filled through the fault plan (the real full disk is tests/fault)."""

from __future__ import annotations

import json
from pathlib import Path

from http_support import HTTP, get, sample, scrape, wait_for

from tidelog.testing import EmbeddedBroker, FaultPlan

MiB = 1 << 20


def test_a_degraded_dir_is_reported_and_cleared(tmp_path: Path) -> None:
    plan = FaultPlan()
    config = {**HTTP, "log.dir.min.free.bytes": str(64 * MiB)}
    with EmbeddedBroker(config, log_dir=tmp_path / "logs", fault_plan=plan) as b:
        base = b.http_url
        d = str(b.broker.replica_manager.logs.dirs[0].path)
        m = scrape(base)
        assert sample(m, "tidelog_log_dir_free_bytes", logDirectory=d) > 64 * MiB
        assert sample(m, "tidelog_log_dir_min_free_bytes", logDirectory=d) == 64 * MiB
        assert sample(m, "tidelog_broker_degraded") == 0
        assert "degraded-banner" not in get(base + "/")[1]

        plan.fill_log_dir(b.log_dir, free_bytes=10 * MiB)
        b.broker.replica_manager.logs.free_space.measure_all()  # what the periodic task does
        m = scrape(base)
        assert sample(m, "tidelog_log_dir_free_bytes", logDirectory=d) == 10 * MiB
        assert sample(m, "tidelog_log_dir_below_min_free", logDirectory=d) == 1
        assert sample(m, "tidelog_broker_degraded") == 1
        status, body = get(base + "/readyz")
        ready = json.loads(body)
        assert status == 200 and ready["ready"] and ready["degraded"]
        assert ready["degraded_log_dirs"] == {d: {"free_bytes": 10 * MiB,
                                                  "min_free_bytes": 64 * MiB}}  # fmt: skip
        for page in ("/", "/topics", "/groups"):
            status, html = get(base + page)
            assert status == 200 and 'id="degraded-banner"' in html and d in html, page
        assert "below the free-space floor" in get(base + "/")[1]

        plan.free_log_dir(b.log_dir)
        b.broker.replica_manager.logs.free_space.measure_all()
        wait_for(lambda: sample(scrape(base), "tidelog_broker_degraded") == 0, "cleared")
        assert "degraded-banner" not in get(base + "/")[1]
        assert json.loads(get(base + "/readyz")[1])["degraded"] is False
