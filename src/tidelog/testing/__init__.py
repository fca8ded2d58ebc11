"""Embedded broker and pytest fixture for users' tests.

``EmbeddedBroker`` starts a tidelog broker in-process (own thread and event loop, port 0,
temporary log dir); the ``tidelog_broker`` pytest fixture (``tidelog.testing.pytest_plugin``,
installed as a pytest11 entry point) yields one per test module.
"""

from .embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker"]
