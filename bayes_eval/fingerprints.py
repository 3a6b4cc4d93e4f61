"""Fingerprints of a pool: what a session file records to know it is reopened on the same data.

Two digests are kept.  The *full* fingerprint (:meth:`bayes_eval.pool.Pool.fingerprint`, and
over the partitions :func:`bayes_eval.partitioned.combine_digests`) hashes the pool's arrays as
they are in memory, the prior probabilities included.  The *portable* fingerprint
(:func:`portable_fingerprint`) hashes what the pool was *given* -- predictions, scores, weights,
ids, the number of classes, the score kind, and the probabilities only where a probability
column gave them: probabilities derived from the scores (``scores.prior_probability``, the
sigmoid of a margin; ``scores.prior_of_classes`` for several classes) go through ``exp``, whose
last bits differ between CPUs (numpy's AVX-512 kernels against libm's), so a session file
written on one machine refused to open on another with the same pool file (found by CI at
stop 65).  A session file records both and compares the portable one (``session_core.same_pool``).
"""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

__all__ = ["hash_ids", "array_digest", "portable_fingerprint", "combine_portable", "PORTABLE_VERSION"]

#: the portable fingerprint's scheme: 1 (stop 65: derived probabilities left out for binary
#: in-memory pools only), 2 (stop 66: every pool, several classes and partitions too)
PORTABLE_VERSION = 2


def hash_ids(h, ids) -> None:
    """Feed the item ids into the hash ``h``: integer ids as int64 bytes (hashing 10^7 Python
    objects took 20 s), any others through ``pandas.util.hash_array``."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        h.update(b"int-ids")
        h.update(np.ascontiguousarray(ids.astype(np.int64)).tobytes())
    else:
        h.update(pd.util.hash_array(np.asarray(ids, dtype=object)).tobytes())


def array_digest(preds, scores, probs, ids) -> bytes:
    """SHA-256 of one partition's (or pool's) arrays -- predictions, scores, probabilities, ids
    and their count; ``probs=None`` stands for probabilities derived from the scores."""
    h = hashlib.sha256()
    for a in (preds, scores):
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(b"derived-probs" if probs is None else np.ascontiguousarray(probs).tobytes())
    hash_ids(h, ids)
    h.update(str(len(ids)).encode())
    return h.digest()


def portable_fingerprint(pool) -> str:
    """The portable fingerprint of an in-memory :class:`~bayes_eval.pool.Pool` (scheme
    :data:`PORTABLE_VERSION`): predictions, scores, weights, ids, classes, the score kind, and the
    probabilities unless ``pool.probs_derived``."""
    h = hashlib.sha256(b"portable-2")
    h.update(array_digest(pool.preds, pool.scores, None if pool.probs_derived else pool.probs, pool.ids))
    h.update(np.ascontiguousarray(pool.weights).tobytes())
    h.update(f"{pool.n_classes}:{pool.score_kind}".encode())
    return h.hexdigest()


def combine_portable(digests, n_classes: int, score_kind: str) -> str:
    """The portable fingerprint of a pool read from partitions (either engine): SHA-256 over the
    partitions' :func:`array_digest` in order, the classes and the score kind (a partitioned pool's
    item weights are uniform)."""
    h = hashlib.sha256(b"portable-2-partitioned")
    for d in digests:
        h.update(d)
    h.update(f"{n_classes}:{score_kind}".encode())
    return h.hexdigest()
