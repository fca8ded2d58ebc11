"""The times ``tidelog groups`` takes: ``--to-datetime`` and ``--by-duration`` (Kafka's
formats)."""

from __future__ import annotations

import datetime as dt
import re

_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def parse_duration_ms(text: str) -> int:
    m = _DURATION.match(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"not an ISO 8601 duration: {text!r}")
    d, h, mi, s = (float(m.group(k) or 0) for k in ("d", "h", "m", "s"))
    return int((((d * 24 + h) * 60 + mi) * 60 + s) * 1000)


def parse_datetime_ms(text: str) -> int:
    t = text.strip().replace("Z", "+00:00")
    parsed = dt.datetime.fromisoformat(t)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.datetime.now().astimezone().tzinfo)  # local, like Kafka
    return int(parsed.timestamp() * 1000)
