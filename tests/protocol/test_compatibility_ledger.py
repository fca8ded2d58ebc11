"""docs/compatibility.md lists exactly the API versions the broker advertises."""

from __future__ import annotations

import re
from pathlib import Path

from tidelog.server.handler_discovery import discover

LEDGER = Path(__file__).resolve().parents[2] / "docs" / "compatibility.md"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| ([0-9]+-[0-9]+|-) \|")


def _ledger() -> dict[int, tuple[int, int] | None]:
    out: dict[int, tuple[int, int] | None] = {}
    for line in LEDGER.read_text().splitlines():
        m = ROW.match(line)
        if m:
            v = m.group(3)
            out[int(m.group(1))] = (
                None if v == "-" else (int(v.split("-")[0]), int(v.split("-")[1]))
            )
    return out


def test_ledger_matches_advertised_versions() -> None:
    advertised = {s.api_key: (s.min_version, s.max_version) for s in discover()}
    ledger = _ledger()
    assert ledger, "no rows parsed from docs/compatibility.md"
    documented = {k: v for k, v in ledger.items() if v is not None}
    assert documented == advertised


def test_ledger_says_telemetry_is_advertised_only_with_a_metrics_receiver() -> None:
    rows = {int(m.group(1)): line for line in LEDGER.read_text().splitlines()
            if (m := ROW.match(line))}
    for key in (71, 72):
        assert _ledger()[key] == (0, 0)
    assert "only with `http.listeners`" in rows[71]
