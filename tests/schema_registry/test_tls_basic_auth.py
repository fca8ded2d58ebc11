"""The registry over TLS (an https:// listener with the broker's ssl.keystore.*) and with
HTTP basic auth checked against the broker's SCRAM users, through confluent-kafka's client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trustme
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from registry_support import RegistryBroker

SCHEMA = Schema(json.dumps({"type": "record", "name": "S", "fields": []}), "AVRO")


def test_https_and_basic_auth(tmp_path: Path) -> None:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    keystore, ca_file = tmp_path / "server.pem", tmp_path / "ca.pem"
    server.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(ca_file))
    config = {"schema.registry.listeners": "https://127.0.0.1:0",
              "schema.registry.authentication.method": "BASIC",
              "ssl.keystore.location": str(keystore)}
    with RegistryBroker(config) as rb:
        assert rb.url.startswith("https://127.0.0.1:")
        admin = AdminClient({"bootstrap.servers": rb.bootstrap_servers})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"s3cret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(30)
        tls = {"url": rb.url, "ssl.ca.location": str(ca_file)}
        client = SchemaRegistryClient({**tls, "basic.auth.user.info": "alice:s3cret"})
        schema_id = client.register_schema("secure", SCHEMA)
        assert client.get_latest_version("secure").schema_id == schema_id
        for user_info in ("alice:wrong", "bob:s3cret"):
            with pytest.raises(SchemaRegistryError) as denied:
                SchemaRegistryClient({**tls, "basic.auth.user.info": user_info}).get_subjects()
            assert denied.value.http_status_code == 401
        with pytest.raises(SchemaRegistryError) as anonymous:
            SchemaRegistryClient(tls).get_subjects()
        assert anonymous.value.http_status_code == 401
        # a client that does not trust the CA cannot connect at all
        with pytest.raises(Exception, match=r"(?i)certificate"):
            SchemaRegistryClient({"url": rb.url, "basic.auth.user.info": "alice:s3cret"}) \
                .get_subjects()
