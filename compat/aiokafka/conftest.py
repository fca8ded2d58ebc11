"""Stand-in for aiokafka's ``tests/conftest.py`` (copied over it by ``run.py``).

aiokafka's own conftest starts Kafka in docker (``--docker-image``) and runs its ACL, SCRAM,
Kerberos and SSL helpers inside that container. Here ``kafka_server`` is the broker
``KAFKA_URI`` names, ``kafka_version`` is ``KAFKA_VERSION``, and the container helpers skip
the test that uses them. The event-loop and class-setup fixtures below are aiokafka's own
(Apache License 2.0), unchanged."""
import asyncio
import gc
import os
import uuid
from dataclasses import dataclass
from urllib.parse import urlparse

import pytest


@dataclass
class KafkaServer:
    host: str
    port: int
    ssl_port: int = 0
    sasl_plain_port: int = 0
    sasl_ssl_port: int = 0
    container: object = None

    @property
    def hosts(self):
        return [f"{self.host}:{self.port}"]


class _NeedsDocker:
    def __init__(self, what):
        self.what = what

    def __getattr__(self, name):
        pytest.skip(f"{self.what} runs commands in aiokafka's Kafka docker container")

    def __truediv__(self, other):
        pytest.skip(f"{self.what} are made in aiokafka's Kafka docker container")


def pytest_addoption(parser):
    parser.addoption("--docker-image", action="store", default=None)
    parser.addoption("--no-pull", action="store_true")


@pytest.fixture(scope="session")
def kafka_server():
    u = urlparse(os.environ["KAFKA_URI"])
    return KafkaServer(u.hostname, u.port)


@pytest.fixture(scope="session")
def session_id():
    return str(uuid.uuid4())


@pytest.fixture(scope="session")
def ssl_folder():
    return _NeedsDocker("the SSL certificates")


@pytest.fixture(scope="class")
def acl_manager():
    return _NeedsDocker("ACLManager")


@pytest.fixture(scope="class")
def kafka_config():
    return _NeedsDocker("KafkaConfig")


@pytest.fixture(scope="class")
def kerberos_utils():
    return _NeedsDocker("KerberosUtils")


@pytest.fixture(scope="session")
def kafka_image():
    return "aiolibs/kafka:2.13_" + os.environ["KAFKA_VERSION"]


@pytest.fixture(scope="class")
def loop(request):
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    yield loop

    if not loop._closed:
        loop.call_soon(loop.stop)
        loop.run_forever()
        loop.close()
    gc.collect()
    asyncio.set_event_loop(None)


@pytest.fixture(autouse=True)
def collect_garbage():
    # This is used to have a better report on ResourceWarnings. Without it
    # all warnings will be filled in the end of last test-case.
    yield
    gc.collect()


@pytest.fixture(scope="class")
def setup_test_class_serverless(request, loop):
    request.cls.loop = loop


@pytest.fixture(scope="class")
def setup_test_class(
    request, loop, kafka_server, ssl_folder, acl_manager, kerberos_utils, kafka_config
):
    request.cls.loop = loop
    request.cls.kafka_host = kafka_server.host
    request.cls.kafka_port = kafka_server.port
    request.cls.kafka_ssl_port = kafka_server.ssl_port
    request.cls.kafka_sasl_plain_port = kafka_server.sasl_plain_port
    request.cls.kafka_sasl_ssl_port = kafka_server.sasl_ssl_port
    request.cls.ssl_folder = ssl_folder
    request.cls.acl_manager = acl_manager
    request.cls.kerberos_utils = kerberos_utils
    request.cls.kafka_config = kafka_config
    request.cls.hosts = kafka_server.hosts

    docker_image = "aiolibs/kafka:2.13_" + os.environ["KAFKA_VERSION"]
    kafka_version = docker_image.split(":")[-1].split("_")[-1]
    request.cls.kafka_version = kafka_version
