"""The console over plain HTTP: every page answers, bad addresses get 404, the message
browser shows text/JSON/hex (escaped), admin actions are refused unless switched on."""

from __future__ import annotations

import re

import confluent_kafka
import pytest
from confluent_kafka.admin import AclOperation
from http_acls import TOPIC_OPERATIONS, admin_conf, grant_console, secured
from http_support import HTTP, get, post

from tidelog.testing import EmbeddedBroker

PAGES = ["/", "/topics", "/topics/pages", "/topics/pages/0", "/topics/pages/0/messages",
         "/groups", "/groups/readers", "/cleaner"]  # fmt: skip


def _fill(eb: EmbeddedBroker) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers})
    p.produce("pages", key=b"k0", value=b'{"n": 1, "tag": "<script>alert(1)</script>"}',
              headers=[("h", b"\x00\x01")])  # fmt: skip
    p.produce("pages", key=None, value=b"\xff\xfe plain")
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                  "group.id": "readers", "enable.auto.commit": False})  # fmt: skip
    c.assign([confluent_kafka.TopicPartition("pages", 0, 0)])
    got = 0
    while got < 2:
        m = c.poll(10)
        assert m is not None and not m.error()
        got += 1
    c.commit(asynchronous=False)
    c.close()


@pytest.fixture(scope="module")
def console():
    with EmbeddedBroker(HTTP) as eb:
        _fill(eb)
        yield eb


def test_every_page_answers(console):
    for page in PAGES:
        status, body = get(console.http_url + page)
        assert status == 200, (page, body[:300])
        assert "<title>" in body and "tidelog" in body


def test_unknown_things_are_404(console):
    for page in ["/topics/nope", "/topics/pages/7", "/topics/nope/0/messages", "/groups/nope"]:
        assert get(console.http_url + page)[0] == 404, page


def test_message_browser_formats_and_escapes(console):
    url = console.http_url + "/topics/pages/0/messages"
    _, text = get(url + "?format=text")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script>alert" not in text
    _, as_json = get(url + "?format=json")
    assert '&#34;n&#34;: 1' in as_json or "&quot;n&quot;: 1" in as_json  # pretty-printed
    _, as_hex = get(url + "?format=hex&offset=1")
    assert "ff fe 20 70 6c 61 69 6e" in as_hex  # the second record only
    assert re.search(r'<td class="num">1</td>', as_hex) and '<td class="num">0</td>' not in as_hex


def test_message_browser_seeks_by_timestamp():
    with EmbeddedBroker(HTTP) as eb:
        p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers})
        for i in range(5):
            p.produce("timed", value=b"at-%d" % i, timestamp=1_700_000_000_000 + 1000 * i)
        assert p.flush(30) == 0
        _, body = get(eb.http_url + "/topics/timed/0/messages?timestamp=1700000002500")
        assert "at-3" in body and "at-2" not in body  # the first record at or after the time
        assert "2023-11-14 22:13:23.000" in body  # shown as UTC time


def test_partition_page_draws_one_rect_per_segment(console):
    _, body = get(console.http_url + "/topics/pages/0")
    assert 'data-segment-count="1"' in body
    for mark in ("log start", "HW", "LEO", "LSO"):
        assert f'data-mark="{mark}"' in body


def test_group_page_shows_lag_and_assignment_free_member_list(console):
    _, body = get(console.http_url + "/groups/readers")
    assert 'id="lag-chart"' in body and "pages-0" in body


def test_admin_actions_are_off_by_default(console):
    status, body = post(console.http_url + "/admin/topics", {"name": "x", "partitions": "1"})
    assert status == 403 and "http.console.admin.enable" in body
    assert get(console.http_url + "/topics/x")[0] == 404
    assert "Create topic" not in get(console.http_url + "/topics")[1]


def test_admin_actions_when_switched_on():
    with EmbeddedBroker({**HTTP, "http.console.admin.enable": "true"}) as eb:
        _fill(eb)
        base = eb.http_url
        page = get(base + "/topics")[1]
        token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
        assert post(base + "/admin/topics", {"name": "made", "partitions": "3"})[0] == 403
        status, body = post(base + "/admin/topics", {"csrf": token, "name": "made",
                                                     "partitions": "3",
                                                     "configs": "retention.ms=1234"})  # fmt: skip
        assert status == 200 and "Topic made" in body and "1234" in body
        assert eb.broker.replica_manager.topic("made").partitions == 3
        status, body = post(base + "/admin/topics", {"csrf": token, "name": "made"})
        assert "not created" in body and "already exists" in body
        status, body = post(base + "/topics/made/config",
                            {"csrf": token, "key": "cleanup.policy", "value": "compact"})  # fmt: skip
        assert status == 200
        assert eb.broker.replica_manager.topic("made").configs == {
            "retention.ms": "1234", "cleanup.policy": "compact"}  # fmt: skip
        _, body = post(base + "/topics/made/config",
                       {"csrf": token, "key": "retention.ms", "value": "soon"})  # fmt: skip
        assert "not changed" in body

        reset = base + "/groups/readers/reset-offsets"
        _, body = post(reset, {"csrf": token, "topic": "pages", "to": "earliest",
                               "dry_run": "1"})  # fmt: skip
        assert "dry run" in body and 'id="reset-plan"' in body
        assert re.search(r"<td>pages-0</td><td class=\"num\">2</td><td class=\"num\">0</td>", body)

        async def committed() -> int:
            g = eb.broker.group_coordinator.groups["readers"]
            return next(o.offset for tp, o in g.offsets.items() if tp.topic == "pages")

        assert eb.run(committed()) == 2
        _, body = post(reset, {"csrf": token, "topic": "pages", "to": "earliest"})
        assert "reset 1 partitions" in body
        assert eb.run(committed()) == 0


def test_message_browser_asks_the_authorizer_for_read():
    """Kafka's StandardAuthorizer with ACLs made by an AdminClient: the console's principal may
    READ "public" and do everything but READ on "secret"; only "public" shows its records (a
    console asking for any other operation would show "secret" and hide "public")."""
    with EmbeddedBroker(secured()) as eb:
        p = confluent_kafka.Producer(admin_conf(eb))
        for topic in ("public", "secret"):
            p.produce(topic, value=b"contents of " + topic.encode())
        assert p.flush(30) == 0
        grant_console(eb, "public", [AclOperation.READ])
        grant_console(eb, "secret", [op for op in TOPIC_OPERATIONS if op != AclOperation.READ])
        status, body = get(eb.http_url + "/topics/secret/0/messages")
        assert status == 403 and "contents of secret" not in body and "READ" in body
        status, body = get(eb.http_url + "/topics/public/0/messages")
        assert status == 200 and "contents of public" in body
