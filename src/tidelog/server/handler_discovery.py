"""Finds the handler modules and fills a ``Registry`` with them (see ``registry.py``): the
table's module imports no handler, the handlers import it, and this one imports both."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from types import ModuleType

from .registry import Registry

HANDLER_PACKAGES = ("tidelog.server.handlers", "tidelog.server.coordinator.group.handlers")


def _modules(package: str) -> Iterator[ModuleType]:
    try:
        pkg = importlib.import_module(package)
    except ModuleNotFoundError:
        return
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package}.{info.name}")
        if hasattr(module, "API_KEY") and hasattr(module, "handle"):
            yield module


def discover(packages: tuple[str, ...] = HANDLER_PACKAGES) -> Registry:
    """A registry holding every handler module found in ``packages``."""
    registry = Registry()
    for package in packages:
        for module in _modules(package):
            registry.register_module(module)
    return registry
