"""Confluent Schema Registry's REST errors: HTTP status, ``error_code`` and message, as its
``Errors`` class and ``Rest*Exception`` classes word them (clients match on the codes)."""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
SCHEMAVERSION_SOFT_DELETED = 40406
SCHEMAVERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004
UNAUTHORIZED = 401
NOT_FOUND_PATH = 404

INVALID_COMPATIBILITY_MESSAGE = (
    "Invalid compatibility level. Valid values are none, backward, forward, full, "
    "backward_transitive, forward_transitive, and full_transitive"
)


class RegistryError(Exception):
    """Answered as ``{"error_code": ..., "message": ...}`` with ``status``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    message = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(404, SCHEMA_NOT_FOUND, message)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        SUBJECT_SOFT_DELETED,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        SUBJECT_NOT_SOFT_DELETED,
        f"Subject '{subject}' was not deleted first before being permanently deleted",
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        SCHEMAVERSION_SOFT_DELETED,
        f"Subject '{subject}' Version {version} was soft deleted."
        "Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        SCHEMAVERSION_NOT_SOFT_DELETED,
        f"Subject '{subject}' Version {version} was not deleted first before being "
        "permanently deleted",
    )


def subject_config_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404,
        SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
        f"Subject '{subject}' does not have subject-level compatibility configured",
    )


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404,
        SUBJECT_MODE_NOT_CONFIGURED,
        f"Subject '{subject}' does not have subject-level mode configured",
    )


def incompatible(subject: str, details: list[str]) -> RegistryError:
    return RegistryError(
        409,
        INCOMPATIBLE_SCHEMA,
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", '
        f"details: [{', '.join(details)}]",
    )


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        INVALID_VERSION,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility(message: str = INVALID_COMPATIBILITY_MESSAGE) -> RegistryError:
    return RegistryError(422, INVALID_COMPATIBILITY_LEVEL, message)


def invalid_mode(mode: str | None = None) -> RegistryError:
    return RegistryError(
        422, INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT and FORWARD."
    )


def not_permitted(message: str) -> RegistryError:
    return RegistryError(422, OPERATION_NOT_PERMITTED, message)


def reference_exists(key: str) -> RegistryError:
    return RegistryError(
        422, REFERENCE_EXISTS, f"One or more references exist to the schema {key}."
    )


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, ID_DOES_NOT_MATCH, message)


def invalid_subject(subject: str) -> RegistryError:
    return RegistryError(
        422, INVALID_SUBJECT, f"The specified subject '{subject}' is not a valid."
    )


def store_error(message: str) -> RegistryError:
    return RegistryError(500, STORE_ERROR, message)


def operation_timeout(message: str) -> RegistryError:
    return RegistryError(500, OPERATION_TIMEOUT, message)
