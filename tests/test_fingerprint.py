"""A session file opens on the same pool on another machine, and on no other pool (stops 65, 66).

The full fingerprint hashes the pool's probabilities, which for a pool of scores alone are derived
from them (sigmoid of a margin), and their last bits differ between CPUs (numpy's exp on AVX-512
against libm's): the legacy session files of tests/golden, written on one machine, refused to open
on another.  New sessions also record a portable fingerprint of what the pool was given
(:mod:`bayes_eval.fingerprints`; scheme 2 since stop 66: pools of several classes and partitioned
pools too).  Another CPU is simulated by moving every derived probability by one ulp."""
from __future__ import annotations

import json
import sqlite3
import warnings
from dataclasses import replace

import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import Session
from bayes_eval.errors import PoolMismatchError
from bayes_eval.pool import Pool, PoolWarning
from bayes_eval.session_core import derived_probs, portable_fingerprint


def _set_meta(path, key, value):
    con = sqlite3.connect(path)
    with con:
        if value is None:
            con.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            con.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(value), key))
    con.close()


def _pool(scores, name="demo"):
    return Pool.from_arrays(scores=scores, preds=(scores >= 0).astype(np.int32),
                            labels=(scores > 0.5).astype(np.int32), name=name)


def test_a_session_opens_on_its_pool_whatever_the_cpu_rounded_and_on_no_other(tmp_path):
    rng = np.random.default_rng(3)
    scores = rng.normal(-1.0, 1.5, 3000)
    pool = _pool(scores)
    assert derived_probs(pool) and pool.probs_derived
    path = str(tmp_path / "s.db")
    s = Session.create(path, pool, measure="f1", design="ais", seed=0)
    s.close()
    # another CPU: the full fingerprint (derived probabilities' bits) differs, the portable one does not
    _set_meta(path, "fingerprint", "0" * 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Session.open(path, pool).close()
    other = _pool(scores + 1e-9)               # other data, the same name and size: refused
    with pytest.raises(PoolMismatchError, match="refusing to open it on different data"):
        Session.open(path, other)
    assert portable_fingerprint(other) != portable_fingerprint(pool)
    # a file written before stop 65 (no portable fingerprint): a full-fingerprint mismatch on a pool of the
    # recorded name and size whose probabilities are derived from its scores opens, with a warning
    _set_meta(path, "portable_fingerprint", None)
    with pytest.warns(PoolWarning, match="last bits differ between CPUs"):
        Session.open(path, pool).close()
    with pytest.raises(PoolMismatchError):                     # another name: refused
        Session.open(path, _pool(scores, name="other"))
    probs = np.stack([1 - 1 / (1 + np.exp(-scores)), 1 / (1 + np.exp(-scores))], 1) * 0.5 + 0.25
    given = Pool.from_arrays(scores=scores, preds=(scores >= 0).astype(np.int32), probs=probs[:, None, :],
                             labels=(scores > 0.5).astype(np.int32), name="demo")
    assert not derived_probs(given) and not given.probs_derived
    with pytest.raises(PoolMismatchError):                     # probabilities given, not derived: refused
        Session.open(path, given)


def test_the_portable_fingerprint_ignores_derived_probabilities_bits_only():
    pool = be.demo_pool(n_items=2000)
    fp = portable_fingerprint(pool)
    assert fp == portable_fingerprint(be.demo_pool(n_items=2000))
    assert fp != portable_fingerprint(be.demo_pool(n_items=2000, seed=1))
    assert fp != portable_fingerprint(be.demo_pool(n_items=2001))


def _other_cpu(pool):
    """The same pool as another CPU derives it: every probability one ulp off."""
    return replace(pool, probs=np.nextafter(pool.probs, 2.0))


@pytest.mark.parametrize("n_classes", [2, 4])
def test_a_session_opens_where_the_derived_probabilities_last_bits_differ(tmp_path, n_classes):
    rng = np.random.default_rng(5)
    n = 3000
    if n_classes == 2:
        pool = _pool(rng.normal(-1.0, 1.5, n))
    else:   # the confidence in the predicted class: the prior of the other classes derived from it
        y = rng.integers(0, n_classes, n)
        conf = rng.uniform(0.3, 1.0, n)
        pred = np.where(rng.random(n) < conf, y, rng.integers(0, n_classes, n))
        pool = Pool.from_arrays(scores=conf, preds=pred, labels=y, n_classes=n_classes, name="demo")
    assert pool.probs_derived
    path = str(tmp_path / "s.db")
    Session.create(path, pool, measure="macro_f1" if n_classes > 2 else "f1", design="ais", seed=0).close()
    moved = _other_cpu(pool)
    assert moved.fingerprint() != pool.fingerprint()
    assert portable_fingerprint(moved) == portable_fingerprint(pool)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Session.open(path, moved).close()
    with pytest.raises(PoolMismatchError):       # the scores moved: another pool
        Session.open(path, replace(moved, scores=np.nextafter(pool.scores, 2.0)))
    # a file of stop 65's scheme 1: opens by it on this CPU; on another, by name and size with a warning
    _set_meta(path, "portable_version", None)
    _set_meta(path, "portable_fingerprint", portable_fingerprint(pool, version=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Session.open(path, pool).close()
    if n_classes == 2:       # scheme 1 left the binary pool's derived probabilities out already
        Session.open(path, moved).close()
        with pytest.raises(PoolMismatchError):   # and refused other scores, as it does
            Session.open(path, replace(moved, scores=np.nextafter(pool.scores, 2.0)))
    else:
        with pytest.warns(PoolWarning, match="last bits differ between CPUs"):
            Session.open(path, moved).close()
        with pytest.raises(PoolMismatchError):          # the warning's path needs the recorded name
            Session.open(path, replace(moved, name="other"))


def test_a_pool_read_from_partitions_keeps_its_fingerprints_when_it_forgets_what_it_derived(tmp_path):
    """A pool read whole from Parquet partitions is given its fingerprints over the partitions (the
    dask engine's); ``forget_derived()`` (everything) dropped them before stop 66, and the pool then
    hashed its whole arrays -- another value, and its session refused it."""
    import os

    import pandas as pd

    from bayes_eval.session_core import pool_fingerprint

    rng = np.random.default_rng(8)
    d = str(tmp_path / "parts")
    os.makedirs(d)
    for p in range(3):
        s = rng.normal(-1.0, 1.5, 1500)
        pd.DataFrame({"score": s, "pred": (s >= 0).astype(np.int8), "label": (s > 0.5).astype(np.int8)}).to_parquet(
            os.path.join(d, f"part-{p}.parquet"))
    pool = Pool.from_parquet_dataset(d, engine="memory")
    full, portable = pool_fingerprint(pool), portable_fingerprint(pool)
    assert full != pool.fingerprint()                      # over the partitions, not the whole arrays
    path = str(tmp_path / "s.db")
    Session.create(path, pool, measure="f1", design="ais", seed=0).close()
    pool.forget_derived()
    assert pool_fingerprint(pool) == full and portable_fingerprint(pool) == portable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Session.open(path, pool).close()
