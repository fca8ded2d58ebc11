"""The HTTP listener above ``server``: Prometheus ``/metrics`` with Kafka's metric names,
``/healthz`` and ``/readyz``, and a server-rendered web console. Off unless
``http.listeners`` is set; only ``tidelog serve``, the embedded test broker and tests
import it (``start_http_listener(broker)`` after ``broker.start()``, ``stop()`` before
``broker.stop()``)."""

from .server import HttpListener, start_http_listener

__all__ = ["HttpListener", "start_http_listener"]
