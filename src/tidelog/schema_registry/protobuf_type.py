"""Protobuf schemas."""

from __future__ import annotations
