"""`tidelog schemas` against a running registry: register (with a reference), list, get,
versions, check, config, mode and delete, through the real command line entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from registry_support import RegistryBroker

from tidelog.cli.main import main

ADDRESS = {"type": "record", "name": "Address", "namespace": "cli",
           "fields": [{"name": "city", "type": "string"}]}
PERSON = {"type": "record", "name": "Person", "namespace": "cli",
          "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "cli.Address"}]}


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, str, str]:
    rc = main(["schemas", "--registry", url, *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_schemas_command(fresh_registry: RegistryBroker, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    url = fresh_registry.url
    (tmp_path / "address.avsc").write_text(json.dumps(ADDRESS))
    (tmp_path / "person.avsc").write_text(json.dumps(PERSON))
    assert run(capsys, url, "register", "address", "--schema-file",
               str(tmp_path / "address.avsc"))[:2] == (0, '{"id": 1}\n')
    rc, out, _ = run(capsys, url, "register", "person", "--schema-file",
                     str(tmp_path / "person.avsc"), "--reference", "cli.Address=address:1")
    assert (rc, json.loads(out)) == (0, {"id": 2})
    assert json.loads(run(capsys, url, "list")[1]) == ["address", "person"]
    got = json.loads(run(capsys, url, "get", "person")[1])
    # stored in Avro Java's form: a named type in the same namespace by its short name
    canonical = {**PERSON, "fields": [PERSON["fields"][0], {"name": "home", "type": "Address"}]}
    assert got["schema"] == canonical and got["references"] == [
        {"name": "cli.Address", "subject": "address", "version": 1}]
    assert json.loads(run(capsys, url, "get", "--id", "1")[1])["schema"] == ADDRESS
    # an incompatible change: check exits 1 with the reasons; register is refused
    broken = {**ADDRESS, "fields": [*ADDRESS["fields"], {"name": "zip", "type": "int"}]}
    rc, out, _ = run(capsys, url, "check", "address", "--schema", json.dumps(broken))
    assert rc == 1 and json.loads(out)["is_compatible"] is False
    rc, _, err = run(capsys, url, "register", "address", "--schema", json.dumps(broken))
    assert rc == 1 and "incompatible with an earlier schema" in err and "(error code 409)" in err
    assert json.loads(run(capsys, url, "config", "address", "--set", "none")[1]) == {
        "compatibility": "NONE"}
    assert json.loads(run(capsys, url, "config", "address")[1]) == {"compatibilityLevel": "NONE"}
    assert json.loads(run(capsys, url, "config")[1]) == {"compatibilityLevel": "BACKWARD"}
    assert run(capsys, url, "register", "address", "--schema", json.dumps(broken))[0] == 0
    assert json.loads(run(capsys, url, "versions", "address")[1]) == [1, 2]
    assert json.loads(run(capsys, url, "mode", "address", "--set", "READONLY")[1]) == {
        "mode": "READONLY"}
    rc, _, err = run(capsys, url, "delete", "address", "--version", "2")
    assert rc == 1 and "read-only mode" in err
    run(capsys, url, "mode", "address", "--set", "READWRITE")
    assert json.loads(run(capsys, url, "delete", "address", "--version", "2")[1]) == 2
    rc, _, err = run(capsys, url, "delete", "address", "--version", "1")
    assert rc == 1 and "One or more references exist" in err
    assert json.loads(run(capsys, url, "delete", "address", "--version", "2",
                          "--permanent")[1]) == 2
    assert json.loads(run(capsys, url, "versions", "address", "--deleted")[1]) == [1]
    rc, _, err = run(capsys, "http://127.0.0.1:1", "list")
    assert rc == 1 and "cannot reach the registry" in err
    # --registry may also follow the action
    assert main(["schemas", "versions", "person", "--registry", url]) == 0
    assert json.loads(capsys.readouterr().out) == [1]
