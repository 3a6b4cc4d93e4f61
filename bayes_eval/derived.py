"""What a pool keeps of the values derived from its data (``docs/architecture.md``, rule 3:
no module-level caches — a cache lives on the object that owns what it caches)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

__all__ = ["derived_value", "forget"]


def derived_value(store: dict, kind: str, key, build: Callable[[], Any], size: int = 4):
    """``build()`` once per ``(kind, key)`` in ``store`` (kind -> an LRU of its ``size`` most
    recently used values; a failing ``build`` caches nothing): :meth:`bayes_eval.pool.Pool.derived`
    and the partitioned pool's (:mod:`bayes_eval.partitioned`)."""
    lru = store.setdefault(kind, OrderedDict())
    if key in lru:
        lru.move_to_end(key)
        return lru[key]
    value = build()
    lru[key] = value
    while len(lru) > size:
        lru.popitem(last=False)
    return value


def forget(store: dict, kind: str | None = None) -> None:
    """Drop what :func:`derived_value` keeps in ``store``: of one ``kind``, or everything."""
    if kind is None:
        store.clear()
    else:
        store.pop(kind, None)
