"""Seed 004, slow tier: interval coverage over 500 thinnings in [0.93, 0.97] where a CLT
applies (a synthetic pool with many positives, and many negatives kept), for F1, precision
(HT/Hájek with the delta method) and the AUC (DeLong, data target); the naive i.i.d.
interval (the unweighted estimate with its plain i.i.d. CLT interval) as the negative
control.  Where the CLT does not apply (the shared pools'
handful of false positives; l = 0.001) see ``benchmarks/results/subsampled.md``."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval import measures as M
from bayes_eval import subsampled as S
from bayes_eval import subsampled_auc as SA

pytestmark = pytest.mark.slow
R = 500


def _pool(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.1).astype(int)
    s = rng.normal(size=n) + 1.5 * y
    return y, s, (s >= 1.0).astype(int)


@pytest.mark.parametrize("l", [0.5, 0.1, 0.01])
@pytest.mark.parametrize("name", ["f1", "precision"])
def test_ht_coverage(name, l):
    y, s, p = _pool()
    m = M.get(name)
    feats = M.features_from_arrays(p, s)
    rows = jnp.take_along_axis(m.loss(feats), jnp.asarray(y)[:, None, None], axis=1)[:, 0, :]
    truth = float(M.value(m, feats, y)[0])
    rng = np.random.default_rng([1, int(1 / l)])
    masks = (y[None, :] == 1) | (rng.random((R, len(y))) < l)

    def cover(b, target="data"):
        core = jax.jit(jax.vmap(lambda mk: S.ht_core(m.g, rows, b, mk, target=target)))
        hits, width = 0, 0.0
        for i in range(0, R, 100):
            v, var = core(jnp.asarray(masks[i:i + 100]))
            sd = np.sqrt(np.asarray(var)[:, 0])
            hits += int(np.sum(np.abs(np.asarray(v)[:, 0] - truth) <= 1.959964 * sd))
            width += float(np.sum(2 * 1.959964 * sd))
        return hits / R, width / R

    assert 0.93 <= cover(jnp.asarray(np.where(y == 1, 1.0, l)))[0] <= 0.97
    # the negative control: the naive i.i.d. interval (unweighted estimate, plain i.i.d. CLT
    # variance, the thinning ignored) has a real width and must fail
    naive, width = cover(jnp.ones(len(y)), target="population")
    assert width > 0.005 and naive < 0.5, (naive, width)


@pytest.mark.parametrize("l", [0.5, 0.1, 0.01])
def test_auc_coverage(l):
    y, s, _ = _pool(seed=3)
    truth = SA.auc(y, s).estimate[0]
    rng = np.random.default_rng([2, int(1 / l)])
    hits = 0
    for _ in range(R):
        keep = (y == 1) | (rng.random(len(y)) < l)
        e = SA.auc(y[keep], s[keep], keep_rate=l)
        hits += e.interval[0][0] <= truth <= e.interval[1][0]
    assert 0.93 <= hits / R <= 0.97
