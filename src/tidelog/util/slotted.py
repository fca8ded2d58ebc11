"""Makers of the small objects made for every request, without their Python ``__init__``.

A slotted dataclass's ``__init__`` only stores its fields, and a named tuple's ``__new__``
only packs them; called through the class, each is a Python frame of its own (about a
microsecond per object in 3.11). ``slotted_maker(cls)`` returns a callable that makes the
same instance in one C call (the native core's ``slotted_maker``: allocated, its slots or
items filled from the positional arguments and the fields' defaults), or the class itself:
without the native core, and for a class the maker does not take (a ``__post_init__``, an
``__init__`` or ``__new__`` of its own, keyword-only or ``init=False`` fields...). A call
with keywords, or with too few or too many arguments, is the class's own call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tidelog._native import core

T = TypeVar("T")


def slotted_maker_py(cls: type[T]) -> Callable[..., T]:
    """The twin: the class itself."""
    return cls


def slotted_maker(cls: type[T]) -> Callable[..., T]:
    """``cls``'s positional constructor, made natively when the core is built."""
    if core is None:
        return slotted_maker_py(cls)
    maker: Callable[..., T] = core.slotted_maker(cls)
    return maker
