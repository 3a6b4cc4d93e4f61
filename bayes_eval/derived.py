"""What a pool keeps of the values derived from its data (``docs/architecture.md``, rule 3:
no module-level caches — a cache lives on the object that owns what it caches)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

__all__ = ["derived_value", "forget", "IDENTITY_KINDS"]


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


#: what a pool read from partitions is *given* at construction rather than computes (its
#: fingerprints over the partitions, their record): forgetting everything keeps these, since
#: recomputing them from the whole arrays would give another value and a session would refuse its pool
IDENTITY_KINDS = ("fingerprint", "portable_fingerprint", "partitions")


def forget(store: dict, kind: str | None = None) -> None:
    """Drop what :func:`derived_value` keeps in ``store``: of one ``kind``, or everything but the
    :data:`IDENTITY_KINDS`."""
    if kind is None:
        for k in [k for k in store if k not in IDENTITY_KINDS]:
            del store[k]
    else:
        store.pop(kind, None)
