"""Confluent Schema Registry's REST API v1 over aiohttp, at the root path as its clients
expect: its paths, query parameters, JSON bodies, error JSON (``error_code``, ``message``) and
content type (``application/vnd.schemaregistry.v1+json``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from . import errors
from .forwarding import LeaderForwarder
from .records import SchemaValue
from .registry import SchemaRegistry
from .schema_types import schema_types

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def reply(request: web.Request, body: Any, status: int = 200) -> web.Response:
    accept = request.headers.get("Accept", "")
    ctype = "application/json" if accept.startswith("application/json") else CONTENT_TYPE
    text = json.dumps(body, ensure_ascii=False)
    return web.Response(
        text=text, status=status, headers={"Content-Type": f"{ctype}; charset=utf-8"}
    )


def schema_json(value: SchemaValue, text: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    if value.schema_type != "AVRO":
        out["schemaType"] = value.schema_type
    if value.references:
        out["references"] = [r.to_json() for r in value.references]
    out["schema"] = value.schema if text is None else text
    return out


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except errors.RegistryError as exc:
        return reply(request, exc.body(), exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        body = {"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}
        return reply(request, body, exc.status)


async def read_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"null")
    except ValueError as exc:
        raise errors.RegistryError(400, 400, f"Unexpected character in the body: {exc}") from None


def int_path(request: web.Request, name: str) -> int:
    try:
        return int(request.match_info[name])
    except ValueError:
        raise errors.RegistryError(404, 404, "HTTP 404 Not Found") from None


def subject_path(request: web.Request) -> str:
    subject = request.match_info["subject"]
    if not subject.strip() or any(ord(c) < 32 for c in subject):
        raise errors.invalid_subject(subject)
    return subject


class RegistryApi:
    def __init__(self, registry: SchemaRegistry, forwarder: LeaderForwarder | None = None) -> None:
        self.registry = registry
        self.forwarder = forwarder  # in a cluster: writes go to the elected leader

    def routes(self, app: web.Application) -> None:
        """Every path also with a trailing slash, which Confluent's registry accepts
        (some clients ask for ``config/`` when no subject is given)."""
        for method, path, handler in self._table():
            if method in ("PUT", "DELETE") or (method == "POST" and path.endswith("/versions")
                                               and not path.startswith("/compatibility")):
                handler = self._write(handler)
            app.router.add_route(method, path, handler)
            if path != "/":
                app.router.add_route(method, path + "/", handler)

    def _write(self, handler: Handler) -> Handler:
        """A write: answered by the leader when another registry leads."""

        async def write(request: web.Request) -> web.StreamResponse:
            if self.forwarder is not None:
                forwarded = await self.forwarder.forward(request)
                if forwarded is not None:
                    return forwarded
            return await handler(request)

        return write

    def _table(self) -> list[tuple[str, str, Handler]]:
        return [
            ("GET", "/", self.root),
            ("GET", "/schemas/types", self.types),
            ("GET", "/schemas", self.schemas),
            ("GET", "/schemas/ids/{id}", self.schema_by_id),
            ("GET", "/schemas/ids/{id}/schema", self.raw_schema_by_id),
            ("GET", "/schemas/ids/{id}/subjects", self.id_subjects),
            ("GET", "/schemas/ids/{id}/versions", self.id_versions),
            ("GET", "/subjects", self.subjects),
            ("POST", "/subjects/{subject}", self.lookup),
            ("DELETE", "/subjects/{subject}", self.delete_subject),
            ("GET", "/subjects/{subject}/versions", self.versions),
            ("POST", "/subjects/{subject}/versions", self.register),
            ("GET", "/subjects/{subject}/versions/{version}", self.version),
            ("DELETE", "/subjects/{subject}/versions/{version}", self.delete_version),
            ("GET", "/subjects/{subject}/versions/{version}/schema", self.raw_version),
            ("GET", "/subjects/{subject}/versions/{version}/referencedby", self.referenced_by),
            ("POST", "/compatibility/subjects/{subject}/versions/{version}", self.compatibility),
            ("POST", "/compatibility/subjects/{subject}/versions", self.compatibility),
            ("GET", "/config", self.get_config),
            ("PUT", "/config", self.put_config),
            ("DELETE", "/config", self.delete_config),
            ("GET", "/config/{subject}", self.get_config),
            ("PUT", "/config/{subject}", self.put_config),
            ("DELETE", "/config/{subject}", self.delete_config),
            ("GET", "/mode", self.get_mode),
            ("PUT", "/mode", self.put_mode),
            ("GET", "/mode/{subject}", self.get_mode),
            ("PUT", "/mode/{subject}", self.put_mode),
            ("DELETE", "/mode/{subject}", self.delete_mode),
            ("GET", "/contexts", self.contexts),
        ]

    # -- schemas ------------------------------------------------------------------------------
    async def root(self, request: web.Request) -> web.Response:
        return reply(request, {})

    async def types(self, request: web.Request) -> web.Response:
        return reply(request, schema_types())

    async def contexts(self, request: web.Request) -> web.Response:
        return reply(request, ["."])

    async def schemas(self, request: web.Request) -> web.Response:
        state, deleted = self.registry.state, flag(request, "deleted")
        prefix = request.query.get("subjectPrefix", "")
        latest_only = flag(request, "latestOnly")
        found = []
        for subject in state.subjects(deleted):
            if not subject.startswith(prefix):
                continue
            versions = state.versions(subject, deleted)
            for version in versions[-1:] if latest_only else versions:
                value = state.get(subject, version)
                if value is not None:
                    found.append(schema_json(value))
        return reply(request, found)

    def _formatted(self, value: SchemaValue, request: web.Request) -> str:
        fmt = request.query.get("format", "")
        return self.registry.parse_value(value).formatted(fmt) if fmt else value.schema

    async def schema_by_id(self, request: web.Request) -> web.Response:
        value = self.registry.by_id(int_path(request, "id"))
        out: dict[str, Any] = {}
        if value.schema_type != "AVRO":
            out["schemaType"] = value.schema_type
        if value.references:
            out["references"] = [r.to_json() for r in value.references]
        out["schema"] = self._formatted(value, request)
        if flag(request, "fetchMaxId"):
            out["maxId"] = self.registry.state.max_id
        return reply(request, out)

    async def raw_schema_by_id(self, request: web.Request) -> web.Response:
        value = self.registry.by_id(int_path(request, "id"))
        return raw(self._formatted(value, request))

    async def id_subjects(self, request: web.Request) -> web.Response:
        pairs = self._id_pairs(request)
        return reply(request, sorted({s for s, _ in pairs}))

    async def id_versions(self, request: web.Request) -> web.Response:
        pairs = self._id_pairs(request)
        return reply(request, [{"subject": s, "version": v} for s, v in sorted(pairs)])

    def _id_pairs(self, request: web.Request) -> list[tuple[str, int]]:
        schema_id = int_path(request, "id")
        self.registry.by_id(schema_id)
        state, deleted = self.registry.state, flag(request, "deleted")
        pairs = []
        for subject, versions in state.schemas.items():
            for version, value in versions.items():
                if value.id == schema_id and (deleted or not value.deleted):
                    pairs.append((subject, version))
        return pairs

    # -- subjects -----------------------------------------------------------------------------
    async def subjects(self, request: web.Request) -> web.Response:
        state = self.registry.state
        prefix = request.query.get("subjectPrefix", "")
        if flag(request, "deletedOnly"):
            live = set(state.subjects(False))
            found = [s for s in state.subjects(True) if s not in live]
        else:
            found = state.subjects(flag(request, "deleted"))
        return reply(request, [s for s in found if s.startswith(prefix)])

    async def versions(self, request: web.Request) -> web.Response:
        subject = subject_path(request)
        if flag(request, "deletedOnly"):
            all_versions = self.registry.subject_versions(subject, True)
            live = set(self.registry.state.versions(subject))
            return reply(request, [v for v in all_versions if v not in live])
        return reply(request, self.registry.subject_versions(subject, flag(request, "deleted")))

    async def register(self, request: web.Request) -> web.Response:
        subject = subject_path(request)
        body = await read_body(request)
        value = await self.registry.register(subject, body, flag(request, "normalize"))
        return reply(request, {"id": value.id})

    async def lookup(self, request: web.Request) -> web.Response:
        subject = subject_path(request)
        body = await read_body(request)
        value = self.registry.lookup(
            subject, body, flag(request, "normalize"), flag(request, "deleted")
        )
        return reply(request, schema_json(value))

    async def version(self, request: web.Request) -> web.Response:
        value = self.registry.get_version(
            subject_path(request), request.match_info["version"], flag(request, "deleted")
        )
        return reply(request, schema_json(value, self._formatted(value, request)))

    async def raw_version(self, request: web.Request) -> web.Response:
        value = self.registry.get_version(
            subject_path(request), request.match_info["version"], flag(request, "deleted")
        )
        return raw(self._formatted(value, request))

    async def referenced_by(self, request: web.Request) -> web.Response:
        found = self.registry.referenced_by(subject_path(request), request.match_info["version"])
        return reply(request, found)

    async def delete_version(self, request: web.Request) -> web.Response:
        version = await self.registry.delete_version(
            subject_path(request), request.match_info["version"], flag(request, "permanent")
        )
        return reply(request, version)

    async def delete_subject(self, request: web.Request) -> web.Response:
        versions = await self.registry.delete_subject(
            subject_path(request), flag(request, "permanent")
        )
        return reply(request, versions)

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = subject_path(request)
        body = await read_body(request)
        messages = self.registry.test_compatibility(
            subject, request.match_info.get("version"), body, flag(request, "normalize")
        )
        out: dict[str, Any] = {"is_compatible": not messages}
        if flag(request, "verbose"):
            out["messages"] = messages
        return reply(request, out)

    # -- config and mode ----------------------------------------------------------------------
    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        registry = self.registry
        config = registry.state.configs.get(subject)
        if subject is not None and config is None and not flag(request, "defaultToGlobal"):
            raise errors.subject_config_not_configured(subject)
        level = (config or {}).get("compatibilityLevel") or registry.level(None)
        out: dict[str, Any] = {"compatibilityLevel": str(level).upper()}
        if config and config.get("normalize") is not None:
            out["normalize"] = config["normalize"]
        return reply(request, out)

    async def put_config(self, request: web.Request) -> web.Response:
        body = await read_body(request)
        subject = request.match_info.get("subject")
        return reply(request, await self.registry.set_config(subject, body))

    async def delete_config(self, request: web.Request) -> web.Response:
        return reply(request, await self.registry.delete_config(request.match_info.get("subject")))

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        modes = self.registry.state.modes
        if subject is not None and subject not in modes and not flag(request, "defaultToGlobal"):
            raise errors.subject_mode_not_configured(subject)
        return reply(request, {"mode": self.registry.mode(subject)})

    async def put_mode(self, request: web.Request) -> web.Response:
        body = await read_body(request)
        subject = request.match_info.get("subject")
        return reply(request, await self.registry.set_mode(subject, body, flag(request, "force")))

    async def delete_mode(self, request: web.Request) -> web.Response:
        return reply(request, await self.registry.delete_mode(subject_path(request)))


def raw(text: str) -> web.Response:
    return web.Response(text=text, headers={"Content-Type": f"{CONTENT_TYPE}; charset=utf-8"})
