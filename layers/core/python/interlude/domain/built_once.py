"""`functools.cached_property` that builds its value once however many threads ask for it first.

Python 3.12 dropped cached_property's lock, so on the functions' runtime two threads that first ask for a service
at once (dispatch's runs side by side, the local stack's request threads) each build one, and each keeps using its
own: two key caches, two tenants' pace leases, two of whatever a service holds for its process. A build takes the
one lock (reentrant: a service built from others builds them under it); once built, the value is an attribute of
the instance and read without this descriptor, as cached_property's is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

_building = threading.RLock()


class built_once(Generic[T]):  # noqa: N801 - used as a decorator, spelt as cached_property is
    def __init__(self, build: Callable[[Any], T]) -> None:
        self.build = build
        self.name = build.__name__
        self.__doc__ = build.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> built_once[T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> T | built_once[T]:
        if instance is None:
            return self
        kept = instance.__dict__
        with _building:
            if self.name not in kept:
                kept[self.name] = self.build(instance)
            return kept[self.name]
