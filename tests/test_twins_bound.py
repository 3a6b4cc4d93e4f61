"""The twins bound's arithmetic (benchmarks/interval_study/twins_bound.py, issue 15): the
probability that a design's labels miss every planted item, and the layered bound's relation to
the single-twin bound it sharpens."""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks", "interval_study"))

import twins_bound as tb  # noqa: E402


def test_p_none_labeled_is_the_hypergeometric_miss_probability():
    rng = np.random.default_rng(0)
    n, lab, k = 60, np.array([0, 3, 12]), np.arange(1, 9)
    exact = tb.p_none_labeled(n, lab, k)
    assert exact.shape == (3, 8)
    np.testing.assert_allclose(exact[0], 1.0)              # nothing labeled: nothing is ever found
    trials = 20000
    for i, L in enumerate(lab[1:], start=1):
        labeled = np.zeros(n, bool)
        labeled[:L] = True
        for kk in (1, 4, 8):
            planted = np.argsort(rng.random((trials, n)), axis=1)[:, :kk]
            p = (~labeled[planted].any(1)).mean()
            se = np.sqrt(p * (1 - p) / trials)
            assert abs(p - exact[i, kk - 1]) < 4 * se + 1e-9, (L, kk, p, exact[i, kk - 1])
    # more planted than unlabeled items: some must be labeled
    assert tb.p_none_labeled(10, np.array([8]), np.array([3]))[0, 0] == 0.0


def test_layered_bound_sums_the_steps_the_single_bound_takes_one_of():
    f_k = 0.6 - 0.01 * np.arange(31)                       # F falls 0.01 per planted item
    n = 1000
    lab = np.array([0, 10, 20, 40])
    for alpha in (0.05, 0.07):
        lay, one = tb.layered_bound(n, lab, f_k, alpha), tb.single_bound(n, lab, f_k, alpha)
        assert lay >= one - 1e-12
        # by hand: Σ_K 0.01 (mean_r P(E_K) − 2α)⁺
        pe = tb.p_none_labeled(n, lab, np.arange(1, 31)).mean(0)
        assert np.isclose(lay, np.sum(0.01 * np.clip(pe - 2 * alpha, 0, None)))
    # nothing labeled: every twin is invisible, so the bound is the whole drop times (1 − 2α)
    assert np.isclose(tb.layered_bound(n, np.zeros(5), f_k, 0.05), 0.30 * 0.9)
    # every item labeled: every twin is seen, no bound
    assert tb.layered_bound(n, np.full(5, n), f_k, 0.05) == 0.0
