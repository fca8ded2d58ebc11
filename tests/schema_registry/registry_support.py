"""A broker with its Schema Registry for tests (an EmbeddedBroker with
``schema.registry.listeners`` on an ephemeral port, restartable on the same ports and log dir),
plus a tiny JSON client for asserting on raw REST answers."""

from __future__ import annotations

import importlib.resources
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from tidelog.schema_registry.listener import SchemaRegistryListener
from tidelog.testing import EmbeddedBroker

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryBroker:
    """An EmbeddedBroker with ``schema.registry.listeners`` on an ephemeral port."""

    def __init__(
        self, config: Mapping[str, Any] | None = None, log_dir: str | None = None
    ) -> None:
        props = {"schema.registry.listeners": "http://127.0.0.1:0", **(config or {})}
        self.embedded = EmbeddedBroker(props, log_dir=log_dir)

    @property
    def listener(self) -> SchemaRegistryListener | None:
        registry: SchemaRegistryListener | None = self.embedded.schema_registry
        return registry

    @property
    def url(self) -> str:
        return self.embedded.schema_registry_url

    @property
    def bootstrap_servers(self) -> str:
        return self.embedded.bootstrap_servers

    def start(self) -> RegistryBroker:
        self.embedded.start()
        return self

    def restart(self) -> None:
        """Clean stop of registry and broker, then both again on the same ports and log dir."""
        self.embedded.restart()

    def stop(self) -> None:
        self.embedded.stop()

    def __enter__(self) -> RegistryBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def call(
    base: str, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> tuple[int, Any, str]:
    """(status, decoded JSON body, Content-Type) of one REST call."""
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": CONTENT_TYPE, **(headers or {})}
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None, resp.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None, err.headers["Content-Type"]


ADDRESS_PROTO = """syntax = "proto3";
package example;
message Address {
  string city = 1;
  string zip = 2;
}
"""
CUSTOMER_PROTO = """syntax = "proto3";
package example;
import "example/address.proto";
import "google/protobuf/timestamp.proto";
message Customer {
  string name = 1;
  int64 id = 2;
  example.Address home = 3;
  google.protobuf.Timestamp since = 4;
  repeated string tags = 5;
  map<string, int32> scores = 6;
  oneof contact {
    string email = 7;
    string phone = 8;
  }
}
"""


def compile_protos(tmp: Path) -> Any:
    """The Customer message class, built from the .proto files by protoc."""
    (tmp / "example").mkdir()
    (tmp / "example/address.proto").write_text(ADDRESS_PROTO)
    (tmp / "example/customer.proto").write_text(CUSTOMER_PROTO)
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    out = tmp / "set.pb"
    assert protoc.main(["protoc", f"-I{tmp}", f"-I{include}", f"--descriptor_set_out={out}",
                        "--include_imports", "example/customer.proto"]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("example.Customer"))
