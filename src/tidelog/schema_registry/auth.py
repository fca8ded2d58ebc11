"""HTTP basic auth for the registry (Confluent's ``authentication.method=BASIC``), checked
against the broker's SCRAM users: the password is salted and hashed with each of the user's
SCRAM credentials and compared with its StoredKey, so no password is ever stored. A verified
(user, password) pair is remembered by its digest, sparing the PBKDF2 work on every request."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from tidelog.protocol.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
    salted_password,
)

from .api import reply

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
REALM = "SchemaRegistry"


class Credentials(Protocol):
    def get(self, user: str, mech: ScramMechanism) -> ScramCredential | None: ...


class BasicAuth:
    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._verified: set[bytes] = set()

    def check(self, header: str | None) -> str | None:
        """The authenticated user, or None."""
        if not header or not header.startswith("Basic "):
            return None
        try:
            user, sep, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep:
            return None
        token = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        if token in self._verified:
            return user
        for mech in ScramMechanism:
            cred = self.credentials.get(user, mech)
            if cred is None:
                continue
            salted = salted_password(mech, password.encode(), cred.salt, cred.iterations)
            derived = credential_from_salted(mech, salted, cred.salt, cred.iterations)
            if hmac.compare_digest(derived.stored_key, cred.stored_key):
                if len(self._verified) > 10_000:
                    self._verified.clear()
                self._verified.add(token)
                return user
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.check(request.headers.get("Authorization")) is None:
            response = reply(request, {"error_code": 401, "message": "Unauthorized"}, 401)
            response.headers["WWW-Authenticate"] = f'Basic realm="{REALM}"'
            return response
        return await handler(request)
