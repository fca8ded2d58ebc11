"""The console's Jinja templates (kept in code so the package needs no data files)."""

from __future__ import annotations

from jinja2 import DictLoader, Environment, select_autoescape

BASE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<link rel="icon" href="data:,">
<title>{{ title }} · tidelog</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;color:#0f172a;background:#fff}
header{background:#0f172a;color:#e2e8f0;padding:10px 20px;display:flex;gap:18px;align-items:center}
header a{color:#e2e8f0;text-decoration:none}header b{font-size:18px;margin-right:12px}
main{padding:16px 20px;max-width:1100px}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border-bottom:1px solid #e2e8f0;
padding:4px 10px;text-align:left;font-size:14px}th{background:#f1f5f9}
.num{text-align:right;font-variant-numeric:tabular-nums}.bad{color:#b91c1c}.ok{color:#15803d}
.card{display:inline-block;border:1px solid #e2e8f0;border-radius:6px;padding:10px 16px;margin:4px}
.banner{background:#fef3c7;color:#78350f;border-bottom:2px solid #d97706;padding:10px 20px}
.card b{display:block;font-size:22px}pre{background:#f8fafc;padding:6px;white-space:pre-wrap;
word-break:break-all;margin:0}#messages td:nth-child(2){white-space:nowrap}form{margin:8px 0}.note{color:#475569;font-size:13px}
</style></head><body>
<header><b>tidelog</b><a href="/">Overview</a><a href="/topics">Topics</a>
<a href="/groups">Groups</a><a href="/cleaner">Cleaner</a><a href="/metrics">Metrics</a>
</header>{% if degraded %}<div id="degraded-banner" class="banner">Degraded: produce requests
are refused (NOT_ENOUGH_REPLICAS, retriable) for partitions in {% for path, d in degraded.items()
%}{{ path }} ({{ d.free_bytes|human }} free, floor {{ d.min_free_bytes|human }}){{ ", " if not
loop.last }}{% endfor %}, below log.dir.min.free.bytes. Reads, commits, retention and deletion go
on; writes resume by themselves once space is freed.</div>{% endif %}<main><h1>{{ title }}</h1>
{% if message %}<p class="{{ 'bad' if error else 'ok' }}" id="message">{{ message }}</p>{% endif %}
{% block body %}{% endblock %}</main></body></html>"""

OVERVIEW = """{% extends "base" %}{% block body %}
<div class="card">Broker<b>{{ node_id }}</b></div>
<div class="card">Cluster<b style="font-size:14px">{{ cluster_id }}</b></div>
<div class="card">Topics<b id="topic-count">{{ topics }}</b></div>
<div class="card">Partitions<b>{{ partitions }}</b></div>
<div class="card">Size<b>{{ size|human }}</b></div>
<div class="card">Groups<b>{{ groups }}</b></div>
<div class="card">Connections<b>{{ connections }}</b></div>
<div class="card">Ready<b class="{{ 'ok' if ready.ready else 'bad' }}">{{ 'yes' if ready.ready else 'no' }}</b></div>
<div class="card">Bytes in/s<b id="bytes-in-rate">{{ topic_rows|sum(attribute='bytes_in')|human }}</b></div>
<div class="card">Bytes out/s<b id="bytes-out-rate">{{ topic_rows|sum(attribute='bytes_out')|human }}</b></div>
<h2>Throughput over the last hour</h2>{{ throughput_chart|safe }}
<h2>Topics</h2><table id="overview-topics"><tr><th>topic</th><th class="num">partitions</th>
<th class="num">size</th><th class="num">bytes in/s</th><th class="num">bytes out/s</th></tr>
{% for t in topic_rows %}<tr><td><a href="/topics/{{ t.name|urlq }}">{{ t.name }}</a></td>
<td class="num">{{ t.partitions }}</td><td class="num">{{ t.size|human }}</td>
<td class="num">{{ t.bytes_in|human }}</td><td class="num">{{ t.bytes_out|human }}</td></tr>
{% endfor %}</table>
<h2>Groups</h2><table id="overview-groups"><tr><th>group</th><th>state</th>
<th class="num">members</th><th class="num">lag</th></tr>{% for g in group_rows %}
<tr><td><a href="/groups/{{ g.id|urlq }}">{{ g.id }}</a></td><td>{{ g.state }}</td>
<td class="num">{{ g.members }}</td><td class="num {{ 'bad' if g.lag else '' }}">{{ g.lag }}</td></tr>
{% endfor %}</table>
<h2>Cluster</h2><table id="overview-cluster"><tr><td>brokers</td><td>{{ cluster.brokers|join(", ") }}</td></tr>
<tr><td>controller</td><td>{{ cluster.controller }}</td></tr>
<tr><td>under-replicated partitions</td><td class="num">{{ cluster.under_replicated }}</td></tr>
<tr><td>offline partitions</td><td class="num {{ 'bad' if cluster.offline else '' }}">{{ cluster.offline }}</td></tr></table>
<h2>Listeners</h2><table><tr><th>name</th><th>address</th></tr>
{% for name, addr in listeners %}<tr><td>{{ name }}</td><td>{{ addr }}</td></tr>{% endfor %}</table>
<h2>Log dirs</h2><table id="log-dirs"><tr><th>dir</th><th>state</th><th class="num">free</th>
<th class="num">min free (floor)</th></tr>
{% for d in log_dirs %}<tr><td>{{ d.path }}</td>
<td class="{{ 'bad' if d.offline or d.below_floor else 'ok' }}">
{{ d.offline or ('below the free-space floor: writes refused' if d.below_floor else 'online') }}</td>
<td class="num">{{ d.free|human if d.free is not none else '-' }}</td>
<td class="num">{{ d.floor|human if d.floor is not none else '-' }}</td></tr>{% endfor %}</table>
<h2>Readiness</h2><table>{% for k, v in ready.checks.items() %}
<tr><td>{{ k }}</td><td class="{{ 'ok' if v else 'bad' }}">{{ v }}</td></tr>{% endfor %}</table>
{% endblock %}"""

TOPICS = """{% extends "base" %}{% block body %}
<table id="topics"><tr><th>topic</th><th class="num">partitions</th><th class="num">size</th>
<th class="num">messages (HW - start)</th><th>cleanup.policy</th><th>retention.ms</th>
<th>retention.bytes</th></tr>
{% for t in topics %}<tr><td><a href="/topics/{{ t.name|urlq }}">{{ t.name }}</a></td>
<td class="num">{{ t.partitions }}</td><td class="num">{{ t.size|human }}</td>
<td class="num">{{ t.messages }}</td><td>{{ t.cleanup_policy }}</td><td>{{ t.retention_ms }}</td>
<td>{{ t.retention_bytes }}</td></tr>{% endfor %}</table>
{% if admin %}<h2>Create topic</h2>
<form method="post" action="/admin/topics"><input type="hidden" name="csrf" value="{{ csrf }}">
<input name="name" placeholder="name" required> <input name="partitions" type="number" value="1" min="1">
<input name="configs" placeholder="key=value,key=value" size="40"> <button>Create</button></form>
{% endif %}{% endblock %}"""

TOPIC = """{% extends "base" %}{% block body %}
<table id="partitions"><tr><th>partition</th><th class="num">local size</th>
<th class="num">remote size</th><th class="num">segments</th>
<th class="num">log start</th><th class="num">LSO</th><th class="num">HW</th><th class="num">LEO</th></tr>
{% for p in partitions %}<tr><td><a href="/topics/{{ topic|urlq }}/{{ p.partition }}">{{ p.partition }}</a></td>
<td class="num local-size" data-bytes="{{ p.size }}">{{ p.size|human }}</td>
<td class="num remote-size" data-bytes="{{ p.remote_size if p.remote_size is not none else '' }}">{{ p.remote_size|human if p.remote_size is not none else '-' }}</td>
<td class="num">{{ p.num_segments }}</td>
<td class="num">{{ p.log_start_offset }}</td><td class="num">{{ p.last_stable_offset }}</td>
<td class="num">{{ p.high_watermark }}</td><td class="num">{{ p.log_end_offset }}</td></tr>{% endfor %}
{% for p in offline %}<tr><td>{{ p }}</td><td colspan="7" class="bad">offline (log dir failed)</td></tr>{% endfor %}
</table>{% if table %}<h2>Iceberg table</h2>
<p id="iceberg-table">Table <b>{{ table.table }}</b> · snapshot <b id="iceberg-snapshot">{{ table.snapshot_id if table.snapshot_id is not none else 'none yet' }}</b>
{% if table.paused %} · <span class="bad">translation paused: {{ table.paused }}</span>{% endif %}</p>
<table id="iceberg-partitions"><tr><th>partition</th><th class="num">committed offset</th>
<th class="num">lag (records)</th><th class="num">lag (ms)</th></tr>
{% for p in table.partitions %}<tr><td>{{ p.partition }}</td><td class="num">{{ p.committed_offset }}</td>
<td class="num">{{ p.lag_records if p.lag_records is not none else '-' }}</td>
<td class="num">{{ p.lag_ms|round|int if p.lag_ms is not none else '-' }}</td></tr>{% endfor %}</table>
{% endif %}<h2>Config</h2><table id="configs"><tr><th>key</th><th>value</th><th>source</th></tr>
{% for k, v, src in configs %}<tr><td>{{ k }}</td><td>{{ v }}</td><td>{{ src }}</td></tr>{% endfor %}</table>
{% if admin %}<h2>Alter config</h2><form method="post" action="/topics/{{ topic|urlq }}/config">
<input type="hidden" name="csrf" value="{{ csrf }}"><input name="key" placeholder="retention.ms" required>
<input name="value" placeholder="value (empty: delete the override)"> <button>Set</button></form>{% endif %}
{% endblock %}"""

PARTITION = """{% extends "base" %}{% block body %}
<p class="note">{{ p.dir }} · {{ p.num_segments }} segments · {{ p.size|human }} ·
recovery point {{ p.recovery_point }}{% if p.compact %} · compacted, cleaner point {{ p.first_dirty_offset }}{% endif %}
· <a href="/topics/{{ p.topic|urlq }}/{{ p.partition }}/messages">browse messages</a></p>
{{ picture|safe }}
<table id="segment-table"><tr><th class="num">base offset</th><th class="num">next offset</th>
<th class="num">size</th><th class="num">index entries</th><th class="num">time index entries</th><th></th></tr>
{% for s in p.segments %}<tr><td class="num">{{ s.base_offset }}</td><td class="num">{{ s.next_offset }}</td>
<td class="num">{{ s.size|human }}</td><td class="num">{{ s.index_entries }}</td>
<td class="num">{{ s.time_index_entries }}</td><td>{{ 'active' if s.active else '' }}</td></tr>{% endfor %}
</table>{% endblock %}"""

MESSAGES = """{% extends "base" %}{% block body %}
<form method="get"><label>offset <input name="offset" value="{{ offset }}" size="10"></label>
<label>or timestamp (ms) <input name="timestamp" value="{{ timestamp or '' }}" size="14"></label>
<label>show as <select name="format">{% for f in ['text','json','hex'] %}
<option {{ 'selected' if f == fmt else '' }}>{{ f }}</option>{% endfor %}</select></label>
<label>limit <input name="limit" value="{{ limit }}" size="4"></label> <button>Go</button></form>
<p class="note">log start {{ p.log_start_offset }} · HW {{ p.high_watermark }}</p>
<table id="messages"><tr><th class="num">offset</th><th>timestamp</th><th>key</th><th>value</th><th>headers</th></tr>
{% for m in records %}<tr><td class="num">{{ m.offset }}</td><td title="{{ m.timestamp }}">{{ m.timestamp|ts }}</td>
<td><pre>{{ m.key }}</pre></td><td><pre>{{ m.value }}</pre></td>
<td>{% for hk, hv in m.headers %}<pre>{{ hk }}: {{ hv }}</pre>{% endfor %}</td></tr>{% endfor %}</table>
{% if next_offset is not none %}<a id="next" href="?offset={{ next_offset }}&format={{ fmt }}&limit={{ limit }}">next</a>{% endif %}
{% endblock %}"""

GROUPS = """{% extends "base" %}{% block body %}
<table id="groups"><tr><th>group</th><th>state</th><th>protocol</th><th class="num">members</th>
<th class="num">lag</th><th>type</th><th class="num">in flight</th></tr>{% for g in groups %}
<tr><td><a href="/groups/{{ g.id|urlq }}">{{ g.id }}</a></td><td>{{ g.state }}</td><td>{{ g.protocol }}</td>
<td class="num">{{ g.members }}</td><td class="num">{{ g.lag }}</td><td>{{ g.type }}</td>
<td class="num">{{ g.in_flight if g.in_flight is not none else "" }}</td></tr>{% endfor %}</table>
{% endblock %}"""

GROUP = """{% extends "base" %}{% block body %}
<p>type <b id="group-type">{{ type }}</b> · state <b id="group-state">{{ state }}</b> · protocol {{ protocol }}
· {{ "generation" if type == "classic" else "group epoch" }} {{ generation }}</p>
{% if chart %}<h2>Lag over the last minutes</h2>{{ chart|safe }}{% endif %}
<h2>Members</h2><table id="members"><tr><th>member</th><th>client</th><th>host</th><th>assignment</th>
<th class="num">partitions</th></tr>
{% for m in members %}<tr><td>{{ m.member_id }}</td><td>{{ m.client_id }}</td><td>{{ m.client_host }}</td>
<td>{{ m.assignment }}</td><td class="num">{{ m.partitions }}</td></tr>{% endfor %}</table>
{% if type == "share" %}<h2>Share-partitions</h2><table id="share-partitions"><tr><th>partition</th>
<th class="num">start (SPSO)</th><th class="num">end (SPEO)</th><th class="num">in flight</th>
<th class="num">acquired</th><th class="num">available</th><th class="num">acknowledged</th>
<th class="num">archived</th><th class="num">oldest lock</th></tr>
{% for sp in share_partitions %}<tr><td>{{ sp.topic }}-{{ sp.partition }}</td><td class="num">{{ sp.start_offset }}</td>
<td class="num">{{ sp.end_offset }}</td><td class="num">{{ sp.in_flight }}</td><td class="num">{{ sp.acquired }}</td>
<td class="num">{{ sp.available }}</td><td class="num">{{ sp.acknowledged }}</td><td class="num">{{ sp.archived }}</td>
<td class="num">{{ (sp.oldest_lock_age_ms / 1000)|round(1) }} s of {{ (sp.lock_duration_ms / 1000)|round(1) }} s</td></tr>{% endfor %}
</table>{% else %}
<h2>Offsets and lag</h2><table id="lag"><tr><th>partition</th><th class="num">committed</th>
<th class="num">end (HW)</th><th class="num">lag</th><th class="num">time lag</th></tr>
{% for l in lags %}<tr><td>{{ l.topic }}-{{ l.partition }}</td><td class="num">{{ l.committed }}</td>
<td class="num">{{ l.end_offset }}</td><td class="num">{{ l.lag }}</td><td class="num">{{ (l.lag_ms / 1000)|round(1) }} s</td></tr>{% endfor %}
</table>{% endif %}
{% if admin and type == "classic" %}<h2>Reset offsets</h2><form method="post" action="/groups/{{ group_id|urlq }}/reset-offsets">
<input type="hidden" name="csrf" value="{{ csrf }}"><input name="topic" placeholder="topic" required>
<select name="to"><option>earliest</option><option>latest</option><option>offset</option><option>timestamp</option></select>
<input name="value" placeholder="offset / timestamp" size="14">
<label><input type="checkbox" name="dry_run" value="1" checked> dry run</label> <button>Reset</button></form>
{% if plan %}<table id="reset-plan"><tr><th>partition</th><th class="num">current</th><th class="num">new</th></tr>
{% for tp, cur, new in plan %}<tr><td>{{ tp }}</td><td class="num">{{ cur }}</td><td class="num">{{ new }}</td></tr>{% endfor %}
</table>{% endif %}{% endif %}{% endblock %}"""

CLEANER = """{% extends "base" %}{% block body %}
{% if not enabled %}<p>The log cleaner is off (log.cleaner.enable=false).</p>{% else %}
<div class="card">max dirty ratio<b>{{ (dirty * 100)|round(1) }} %</b></div>
<div class="card">last run<b>{{ since }}</b></div>
<div class="card">uncleanable<b>{{ uncleanable|length }}</b></div>
<h2>Compacted partitions</h2>{% if empty %}<p class="note">{{ empty }} empty compacted partitions not shown</p>{% endif %}
<table id="compacted"><tr><th>partition</th><th class="num">cleaner point</th><th class="num">dirty ratio</th>
<th class="num">LEO</th><th class="num">size</th><th>state</th><th class="num">last: read → written</th>
<th class="num">buffer use</th></tr>{% for r in rows %}
<tr><td><a href="/topics/{{ r.topic|urlq }}/{{ r.partition }}">{{ r.topic }}-{{ r.partition }}</a></td>
<td class="num">{{ r.first_dirty }}</td><td class="num">{{ r.dirty }}</td><td class="num">{{ r.leo }}</td><td class="num">{{ r.size|human }}</td>
<td>{{ r.state }}</td><td class="num">{{ r.last }}</td><td class="num">{{ r.buffer }}</td></tr>{% endfor %}
</table>{% if uncleanable %}<h2>Uncleanable</h2><ul>{% for u in uncleanable %}<li class="bad">{{ u }}</li>{% endfor %}</ul>{% endif %}
{% endif %}{% endblock %}"""

TEMPLATES = {
    "base": BASE,
    "overview": OVERVIEW,
    "topics": TOPICS,
    "topic": TOPIC,
    "partition": PARTITION,
    "messages": MESSAGES,
    "groups": GROUPS,
    "group": GROUP,
    "cleaner": CLEANER,
}


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def timestamp(ms: int) -> str:
    """A record timestamp as UTC time (the raw milliseconds are the cell's title)."""
    from datetime import UTC, datetime

    if ms < 0:
        return str(ms)
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):
        return str(ms)


def environment() -> Environment:
    from urllib.parse import quote

    env = Environment(loader=DictLoader(TEMPLATES), autoescape=select_autoescape(default=True))
    env.filters["human"] = human
    env.filters["urlq"] = lambda s: quote(str(s), safe="")
    env.filters["ts"] = timestamp
    return env
