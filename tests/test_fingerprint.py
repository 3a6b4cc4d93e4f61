"""A session file opens on the same pool on another machine, and on no other pool (stop 65).

The full fingerprint hashes the pool's probabilities, which for a pool of scores alone are derived
from them (sigmoid of a margin), and their last bits differ between CPUs (numpy's exp on AVX-512
against libm's): the legacy session files of tests/golden, written on one machine, refused to open
on another.  New sessions also record a portable fingerprint of what the pool was given."""
from __future__ import annotations

import json
import sqlite3
import warnings

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
    assert derived_probs(pool)
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
    assert not derived_probs(given)
    with pytest.raises(PoolMismatchError):                     # probabilities given, not derived: refused
        Session.open(path, given)


def test_the_portable_fingerprint_ignores_derived_probabilities_bits_only():
    pool = be.demo_pool(n_items=2000)
    fp = portable_fingerprint(pool)
    assert fp == portable_fingerprint(be.demo_pool(n_items=2000))
    assert fp != portable_fingerprint(be.demo_pool(n_items=2000, seed=1))
    assert fp != portable_fingerprint(be.demo_pool(n_items=2001))
