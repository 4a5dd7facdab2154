"""A small thread-safe cache of the most recently used entries (plans, SQL text, aggregates)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Recent"]

V = TypeVar("V")


class Recent(Generic[V]):
    """The ``size`` most recently used entries of a mapping; safe to share between threads.

    A cache of size 0 keeps nothing.

    >>> cache: Recent[str] = Recent(2)
    >>> cache.put("a", "1"); cache.put("b", "2"); cache.get("a"); cache.put("c", "3")
    '1'
    >>> cache.get("b") is None, cache.get("a"), len(cache)
    (True, '1', 2)
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        """Return the entry of ``key`` (now the most recent), or None."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        """Keep ``value`` under ``key``, dropping the least recently used beyond the size."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
