"""Poisson designs (bayes_eval.poisson_designs; seed 000 §3, App. B.1, App. D, App. E).

Exact checks by enumeration on tiny pools (unbiasedness of every round estimator and of the
round combinations, unbiasedness of the martingale variance estimate), then jit-compiled
simulations on synthetic pools: totals unbiased over 400 repeats, the estimate exact once
every item that can matter is labeled, interval coverage.
"""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval import measures as M
from bayes_eval import poisson as P
from bayes_eval import poisson_designs as PD
from bayes_eval.cells import CellTable
from bayes_eval.pool import demo_pool
from bayes_eval.simulate import run_simulation, summarize


# ------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------
def f1_g(r):
    return jnp.atleast_1d(r[0] / r[1])


def f1_loss_rows(y, f):
    y = np.asarray(y, float)
    f = np.asarray(f, float)
    return np.stack([y * f, 0.5 * (y + f)], axis=-1)


def f1_cells(sizes, preds, positives, prior1):
    """A hand-made binary F1 cell table: cell x has sizes[x] items predicted preds[x], of
    which positives[x] are positive; classifier probability prior1[x]."""
    sizes = np.asarray(sizes, float)
    preds = np.asarray(preds, float)
    pos = np.asarray(positives, float)
    x = sizes.size
    loss = np.zeros((x, 2, 2))
    loss[:, 0] = f1_loss_rows(np.zeros(x), preds)
    loss[:, 1] = f1_loss_rows(np.ones(x), preds)
    prior = np.stack([1 - np.asarray(prior1, float), np.asarray(prior1, float)], axis=1)
    truth = np.stack([sizes - pos, pos], axis=1)
    return CellTable(stratum=jnp.arange(x, dtype=jnp.int32), size=jnp.asarray(sizes),
                     weight=jnp.full(x, 1.0 / sizes.sum()), loss=jnp.asarray(loss), prior=jnp.asarray(prior),
                     truth=jnp.asarray(truth))


def true_risk(cells):
    return np.einsum("x,xc,xcd->d", np.asarray(cells.weight), np.asarray(cells.truth), np.asarray(cells.loss))


def binom_pmf(n, b):
    from scipy.stats import binom

    return binom.pmf(np.arange(n + 1), n, b)


# ------------------------------------------------------------------------------------
# proposal
# ------------------------------------------------------------------------------------
def test_round_proposal_budget_support_and_complete():
    cells = f1_cells([5, 40, 300, 2000], [1, 0, 0, 0], [4, 3, 2, 0], [0.9, 0.3, 0.05, 0.01])
    labeled = jnp.asarray([[0.0, 2.0], [5.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    pi = PD.prior_predictive(cells, 0.9)
    unl = np.asarray(cells.size) - np.asarray(labeled).sum(1)
    for est, form, dfd in [("ht", "sqrt", 0.0), ("difference", "linear", 0.0), ("ht", "moment:0.5", 0.2)]:
        prop = PD.round_proposal(f1_g, cells, labeled, pi, 50.0, estimator=est, form=form, defensive=dfd)
        b = np.asarray(prop.b)
        assert np.all((b >= 0) & (b <= 1))
        np.testing.assert_allclose((unl * b).sum(), 50.0, rtol=1e-10)
        assert np.all(b[unl > 0] > 0), b  # every unlabeled item that can matter keeps b > 0
        assert np.isfinite(float(prop.pred_var))
    prop = PD.round_proposal(f1_g, cells, labeled, pi, 50.0, complete=True)
    np.testing.assert_array_equal(np.asarray(prop.b), 1.0)
    # a cell whose loss does not depend on y needs no label under the difference estimator
    c2 = f1_cells([10, 10], [1, 0], [5, 0], [0.5, 0.1])
    loss = np.asarray(c2.loss).copy()
    loss[1, :, :] = [0.3, 0.7]
    c2 = c2._replace(loss=jnp.asarray(loss))
    sup = np.asarray(PD.support_mask(c2.loss, "difference"))
    np.testing.assert_array_equal(sup, [True, False])
    b = PD.round_proposal(f1_g, c2, jnp.zeros((2, 2)), PD.prior_predictive(c2), 5.0).b
    assert float(b[1]) == 0.0 and float(b[0]) > 0


def test_static_proposal_is_nested_and_sqrt_form_is_000_eq12():
    cells = f1_cells([3, 20, 200, 3000], [1, 1, 0, 0], [3, 10, 5, 1], [0.95, 0.6, 0.1, 0.02])
    bs = [np.asarray(PD.static_proposal(f1_g, cells, m).b) for m in (10, 50, 200, 800)]
    for lo, hi in zip(bs, bs[1:]):
        assert np.all(hi >= lo - 1e-15)  # b grows with the budget: nested samples
    # sqrt deviations = 000 eq. 12 with the λ-mixed probabilities and F'_a (eq. 13-14)
    pa = np.asarray(PD.prior_predictive(cells, 0.9))[:, 1]
    f = np.array([1, 1, 0, 0.0])
    size = np.asarray(cells.size)
    mu_x = np.sum(size * pa * f) / size.sum()
    mu_y = np.sum(size * 0.5 * (pa + f)) / size.sum()
    F = mu_x / mu_y
    dev1 = (f - F * 0.5 * (1 + f)) / mu_y
    dev0 = (-F * 0.5 * f) / mu_y
    h = np.sqrt(pa * dev1**2 + (1 - pa) * dev0**2) / size.sum()
    prop = PD.static_proposal(f1_g, cells, 50)
    np.testing.assert_allclose(np.asarray(prop.h), h, rtol=1e-10)


# ------------------------------------------------------------------------------------
# estimators: exact unbiasedness by enumeration
# ------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", ["ht", "difference"])
def test_round_totals_unbiased_by_enumeration(estimator):
    cells = f1_cells([3, 2, 4], [1, 0, 0], [2, 1, 1], [0.7, 0.4, 0.1])
    labeled_before = jnp.asarray([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
    pi = PD.prior_predictive(cells, 0.8)
    prop = PD.round_proposal(f1_g, cells, labeled_before, pi, 2.5, estimator=estimator, form="sqrt")
    b = np.asarray(prop.b)
    unl_true = np.asarray(cells.truth) - np.asarray(labeled_before)
    R = true_risk(cells)
    flat = [(x, y) for x in range(3) for y in range(2)]
    pmfs = [binom_pmf(int(unl_true[x, y]), b[x]) for x, y in flat]
    mean_T = np.zeros(2)
    second = np.zeros((2, 2))
    mean_V = np.zeros((2, 2))
    for ks in itertools.product(*[range(len(p)) for p in pmfs]):
        prob = np.prod([p[k] for p, k in zip(pmfs, ks)])
        s = np.zeros((3, 2))
        for (x, y), k in zip(flat, ks):
            s[x, y] = k
        rec = PD.RoundRecord(prop.b, prop.mean, labeled_before, jnp.asarray(s), prop.pred_var)
        T, V = PD.round_totals(cells, rec)
        mean_T += prob * np.asarray(T)
        second += prob * np.outer(np.asarray(T) - R, np.asarray(T) - R)
        mean_V += prob * np.asarray(V)
    np.testing.assert_allclose(mean_T, R, rtol=1e-12, atol=1e-15)
    # the HT covariance estimate (000 eq. 28, vector form) is unbiased for the round's covariance
    np.testing.assert_allclose(mean_V, second, rtol=1e-10, atol=1e-15)


def _two_round_outcomes(y, f, b1, second_round):
    """All (round-1 sample, round-2 sample) pairs with their probabilities; round 2's
    probabilities, model means and predicted variance depend on round 1's outcome."""
    n = len(y)
    for s1 in itertools.product([0, 1], repeat=n):
        s1 = np.array(s1)
        p1 = np.prod(np.where(s1 == 1, b1, 1 - b1))
        if p1 == 0:
            continue
        b2, m1, m2, pv2 = second_round(s1)
        for s2 in itertools.product([0, 1], repeat=n):
            s2 = np.array(s2)
            if np.any(s1 & s2):
                continue
            p2 = np.prod(np.where(s1 == 1, 1.0, np.where(s2 == 1, b2, 1 - b2)))
            if p2 == 0:
                continue
            yield p1 * p2, s1, s2, b2, m1, m2, pv2


@pytest.mark.parametrize("weights", ["equal", "quadratic", "precision", "last"])
@pytest.mark.parametrize("difference", [False, True])
def test_two_adaptive_rounds_unbiased_by_enumeration(weights, difference):
    y = np.array([1, 0, 1, 0, 0])
    f = np.array([1, 1, 0, 0, 0])
    rows = f1_loss_rows(y, f)
    p = np.full(5, 0.2)
    b1 = np.array([1.0, 0.6, 0.3, 0.2, 0.5])
    m1 = np.where(difference, 1.0, 0.0) * f1_loss_rows(np.full(5, 0.4), f)  # model means of round 1

    def second_round(s1):
        # round 2 adapts: more mass where round 1 found positives among the predicted negatives
        found = float(np.sum(s1 * y * (1 - f)))
        b2 = np.clip(np.array([0.9, 0.5, 0.4 + 0.3 * found, 0.3, 0.2 + 0.1 * found]), 0.05, 1.0)
        q = 0.2 + 0.3 * found
        m2 = np.where(difference, 1.0, 0.0) * f1_loss_rows(np.full(5, q), f)
        pv2 = 1.0 + found
        return b2, m1, m2, pv2

    R = rows.T @ p
    mean = np.zeros(2)
    second = np.zeros((2, 2))
    mean_cov = np.zeros((2, 2))

    @jax.jit
    def estimate(p_lab, rnd, b_drawn, means, tot, pv):
        # unlabeled items enter with weight 0 (fixed shapes: one compilation)
        return PD.online_poisson_estimate(lambda r: r, rows, p_lab, rnd, b_drawn, 2, mean_rows=means,
                                          round_model_totals=tot, weights=weights, pred_var=pv)

    for prob, s1, s2, b2, m1_, m2_, pv2 in _two_round_outcomes(y, f, b1, second_round):
        lab = (s1 | s2).astype(bool)
        rnd = np.where(s1 == 1, 0, 1)
        b_drawn = np.where(lab, np.where(s1 == 1, b1, b2), 1.0)
        means = np.where((s1 == 1)[:, None], m1_, m2_)
        u1 = np.ones(5, bool)
        u2 = s1 == 0
        tot = np.stack([p[u1] @ m1_[u1], p[u2] @ m2_[u2]])
        est = estimate(p * lab, rnd, b_drawn, means, tot, np.array([3.0, pv2]))
        r_hat = np.asarray(est.risk)
        mean += prob * r_hat
        second += prob * np.outer(r_hat - R, r_hat - R)
        mean_cov += prob * np.asarray(est.risk_cov)
    np.testing.assert_allclose(mean, R, rtol=1e-12)
    # predictable weights: E sum_r w_r^2 V_hat_r = Var(R_hat) (martingale differences)
    np.testing.assert_allclose(mean_cov, second, rtol=1e-10, atol=1e-14)


def test_online_estimate_matches_000_eq128_and_single_round():
    rng = np.random.default_rng(0)
    n, R = 40, 4
    y = (rng.random(n) < 0.3).astype(float)
    f = (rng.random(n) < 0.3).astype(float)
    rows = f1_loss_rows(y, f)
    rnd = rng.integers(-1, R, n)
    b = rng.uniform(0.1, 1.0, n)
    lab = rnd >= 0
    risk_ref, cov_ref = P.online_ht_risk(rows, None, b, rnd, R)
    est = PD.online_poisson_estimate(f1_g, rows[lab], np.full(lab.sum(), 1.0 / n), rnd[lab], b[lab], R,
                                     weights="equal")
    np.testing.assert_allclose(est.risk, risk_ref, rtol=1e-12)
    np.testing.assert_allclose(est.risk_cov, cov_ref, rtol=1e-12)
    # one round: the offline HT estimator of 000 eq. 18 / 28 and its delta method
    s = rng.random(n) < b
    ref = P.ht_estimate(lambda r: r[0] / r[1], rows, None, b, s)
    off = PD.poisson_estimate(f1_g, rows[s], b[s], np.full(s.sum(), 1.0 / n))
    np.testing.assert_allclose(off.risk, ref.risk, rtol=1e-12)
    np.testing.assert_allclose(off.risk_cov, ref.risk_covariance, rtol=1e-12)
    np.testing.assert_allclose(off.cov[0, 0], ref.covariance, rtol=1e-10)


def test_full_labeling_is_exact_for_macro_and_micro_f1():
    # 000 App. D: multi-class measures are just measures; b = 1 everywhere gives G exactly
    rng = np.random.default_rng(1)
    n, C = 60, 3
    y = rng.integers(0, C, n)
    pred = np.where(rng.random(n) < 0.7, y, rng.integers(0, C, n))
    feats = M.features_from_arrays(pred[:, None], n_classes=C)
    for meas in (M.macro_f1(C), M.micro_f1(C)):
        rows = np.asarray(meas.loss(feats))[np.arange(n), y]
        est = PD.poisson_estimate(meas.g, rows, np.ones(n), np.full(n, 1.0 / n))
        np.testing.assert_allclose(est.value, M.value(meas, feats, y), rtol=1e-12)
        np.testing.assert_allclose(est.cov, 0.0, atol=1e-20)
        # and a model-assisted estimate with arbitrary model means is exact too
        m = rng.random(rows.shape)
        est2 = PD.poisson_estimate(meas.g, rows, np.ones(n), np.full(n, 1.0 / n), mean_rows=m,
                                   model_total=m.mean(0))
        np.testing.assert_allclose(est2.value, M.value(meas, feats, y), rtol=1e-12)


def test_round_weights_sum_to_one_and_are_predictable():
    R = 6
    pv = jnp.asarray([5.0, 3.0, 1.0, 0.5, 0.4, 0.1])
    for scheme in ("equal", "linear", "quadratic", "power:1.5", "precision", "last"):
        for t in range(R):
            w = np.asarray(PD.round_weights(t, R, scheme, pv))
            np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-12)
            assert np.all(w[t + 1:] == 0)
    # precision: w_r (r < t) may depend on t and on pred_var of rounds <= r only
    t = 4
    w = np.asarray(PD.round_weights(t, R, "precision", pv))
    pv2 = pv.at[3:].set(jnp.asarray([7.0, 0.01, 2.0]))
    w2 = np.asarray(PD.round_weights(t, R, "precision", pv2))
    np.testing.assert_allclose(w[:3], w2[:3], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(PD.round_weights(t, R, "precision", jnp.ones(R)))[: t + 1], 1 / (t + 1))
    # a complete round takes all the weight from then on
    w = np.asarray(PD.round_weights(5, R, "quadratic", pv, complete_round=3))
    np.testing.assert_array_equal(w, [0, 0, 0, 1, 0, 0])


def _check_fixed_size(methods):
    u_true = jnp.asarray([[0.0, 3.0], [40.0, 2.0], [300.0, 1.0], [2000.0, 0.0]])
    unl = np.asarray(u_true).sum(1)
    h = np.array([10.0, 1.0, 0.2, 0.01])
    b = np.asarray(P.water_fill_groups(h, unl, 30.0))
    for method in methods:
        keys = jax.random.split(jax.random.PRNGKey(3), 2000)
        draw = jax.jit(jax.vmap(lambda k: PD.fixed_size_round_counts(k, u_true, jnp.asarray(b), 30.0, 30, method)))
        cnt = draw(keys)
        cnt = np.asarray(cnt)
        np.testing.assert_array_equal(cnt.sum((1, 2)), 30.0)
        assert np.all(cnt <= np.asarray(u_true)[None])
        incl = cnt.sum(2).mean(0) / unl
        # order sampling approximates the target inclusion probabilities (000 §3 design)
        np.testing.assert_allclose(incl, b, rtol=0.1 if method == "pareto" else 0.15)


def test_fixed_size_rounds_exact_size_and_inclusion():
    _check_fixed_size(["pareto"])
    # fewer candidates than n: all of them
    small = jnp.asarray([[1.0, 1.0], [2.0, 0.0]])
    c = PD.fixed_size_round_counts(jax.random.PRNGKey(0), small, jnp.asarray([0.5, 0.5]), 10.0, 10)
    np.testing.assert_array_equal(np.asarray(c), np.asarray(small))


def test_design_validation():
    with pytest.raises(ValueError, match="design"):
        PD.poisson_design("poisson-fancy")
    with pytest.raises(ValueError, match="oracle model"):
        PD.poisson_design("poisson-adaptive")
    with pytest.raises(ValueError, match="estimator"):
        PD.poisson_design("poisson", estimator="ratio")
    with pytest.raises(ValueError, match="form"):
        PD.poisson_design("poisson", form="moment:-1")
    with pytest.raises(ValueError, match="weights"):
        PD.poisson_design("poisson", weights="fancy")
    with pytest.raises(ValueError, match="fixed-size"):
        PD.poisson_design("poisson", fixed_size="pareto")
    with pytest.raises(ValueError, match="b > 0"):
        PD.poisson_estimate(f1_g, np.ones((2, 2)), [0.5, 0.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="label_round"):
        PD.online_poisson_estimate(f1_g, np.ones((2, 2)), [0.5, 0.5], [0, 3], [0.5, 0.5], 2)


# ------------------------------------------------------------------------------------
# jit-compiled simulation on synthetic pools
# ------------------------------------------------------------------------------------
def _totals_and_f1():
    f1 = M.f1()
    return M.Measure("f1_totals", f1.loss, lambda R: jnp.stack([R[0], R[1], R[0] / R[1]]), 2,
                     ("tp", "den", "f1"), f1.pattern)


def test_adaptive_simulation_unbiased_exact_and_000_eq128_covers():
    """Totals unbiased over 400 repeats (mean within 3 SE), estimate exact once every item
    that can matter is labeled, and the 95% intervals of the 000-eq.-128 configuration cover
    in [0.90, 0.99]."""
    pool = demo_pool(n_items=400, positive_rate=0.1, seed=1)
    meas = _totals_and_f1()
    res, cells = run_simulation(pool, meas, "poisson-adaptive", budget=450, batch=50, repeats=400, seed=0,
                                n_strata=8, depth=3, checkpoints=(100, 200, 400), form="sqrt", defensive=0.0,
                                weights="equal", companion="none")
    truth = res.true_value
    v = res.checkpoint_value
    for i in range(2):  # checkpoints before completion
        for j in range(2):  # the totals: exactly unbiased
            se = v[:, i, j].std(ddof=1) / np.sqrt(v.shape[0])
            err = abs(v[:, i, j].mean() - truth[j])
            assert err <= 3 * se + 1e-12, (i, j, err, se)
    # 400 expected labels >= the 400 items: the round that reaches it labels all -> exact
    np.testing.assert_allclose(v[:, 2, :], np.broadcast_to(truth, v[:, 2, :].shape), rtol=1e-12)
    np.testing.assert_array_equal(res.checkpoint_labels[:, 2], 400)
    s = summarize(res)
    assert abs(s[0]["mean_draws"] - 100) < 5 and abs(s[1]["mean_draws"] - 200) < 5
    cover = (res.checkpoint_lower[:, 1, 2] <= truth[2]) & (truth[2] <= res.checkpoint_upper[:, 1, 2])
    assert 0.90 <= cover.mean() <= 0.99, cover.mean()


def test_static_design_through_run_simulation():
    pool = demo_pool(n_items=1500, positive_rate=0.05, seed=2)
    res, cells = run_simulation(pool, M.f1(), "poisson", budget=400, batch=100, repeats=40, seed=0,
                                checkpoints=(200, 400))
    s = summarize(res)
    assert [c["labels"] for c in s] == [200, 400]
    assert abs(s[1]["mean_draws"] - 400) < 15  # realized labels: random, mean = budget
    assert np.all(np.isfinite(res.checkpoint_value))
    assert res.design == "poisson"
    # every repeat's samples are nested: labels never decrease
    assert np.all(np.diff(res.history.n_labels, axis=1) >= 0)
    with pytest.raises(ValueError, match="deterministic"):
        run_simulation(pool, M.f1(), "poisson", budget=100, repeats=2, oracle="stochastic")


@pytest.mark.slow
def test_fixed_size_sequential_poisson():
    _check_fixed_size(["sequential"])


@pytest.mark.slow
def test_default_adaptive_f1_unbiased_and_coverage_study():
    """Slow tier: the default (aggressive) adaptive design on a 0.5%-positive pool: totals
    unbiased over 1000 repeats; F1 bias within 3 SE at the end of the budget; and the
    coverage of its intervals, which is *known* to fall short mid-run on imbalanced pools
    (the variance estimate cannot see relevant items never drawn) -- documented here."""
    pool = demo_pool(n_items=20_000, positive_rate=0.005, seed=3)
    meas = _totals_and_f1()
    res, _ = run_simulation(pool, meas, "poisson-adaptive", budget=2000, batch=50, repeats=1000, seed=0,
                            n_strata=64, depth=6, checkpoints=(500, 2000))
    truth = res.true_value
    v = res.checkpoint_value
    for i in range(2):
        for j in range(2):
            se = v[:, i, j].std(ddof=1) / np.sqrt(v.shape[0])
            assert abs(v[:, i, j].mean() - truth[j]) <= 3 * se + 1e-12
    cover = (res.checkpoint_lower[:, 1, 2] <= truth[2]) & (truth[2] <= res.checkpoint_upper[:, 1, 2])
    assert cover.mean() >= 0.5


def _check_bayesian_interval(repeats):
    pool = demo_pool(n_items=3000, positive_rate=0.01, seed=5)
    res, _ = run_simulation(pool, M.f1(), "poisson-adaptive", budget=300, batch=50, repeats=repeats, seed=0,
                            n_strata=32, depth=5, checkpoints=(300,), bayes=True, bayes_draws=200)
    s = summarize(res)[0]
    assert s["coverage_bayes"] >= 0.90, s
    assert s["mean_width_bayes"] < 0.5, s  # an interval, not the whole [0, 1]
    # ... and not wider than its errors call for: the mean width against the width of a
    # 95% normal interval with the RMSE of the posterior mean (measured 0.95 in 100 runs;
    # an interval twice as wide gives ~1.9), and the interval shrunk to half its width
    # about its centre covers far less than 95% (measured 0.61)
    truth = res.true_value[0]
    lo, hi, mean = res.bayes_lower[:, 0, 0], res.bayes_upper[:, 0, 0], res.bayes_mean[:, 0, 0]
    rmse = np.sqrt(np.mean((mean - truth) ** 2))
    assert s["mse_bayes"] == pytest.approx(rmse**2, rel=1e-9)    # simulate's JSON reports it
    ratio = s["mean_width_bayes"] / (2 * 1.959964 * rmse)
    assert 0.5 <= ratio <= 1.5, (ratio, s)
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    assert np.mean((centre - half / 2 <= truth) & (truth <= centre + half / 2)) <= 0.85


@pytest.mark.slow
def test_default_adaptive_bayesian_interval_covers():
    """The default adaptive design's Bayesian interval (finite-pool posterior under the
    calibrated model, design-agnostic because Poisson selection is ignorable, 001 §4.2)
    covers the true F1 in at least 90% of 100 runs on a synthetic imbalanced pool (it is
    conservative: 1.0 in 200 runs at 300 labels, and on abt-buy -- the unlabeled low-score
    strata stay uncertain), where the CLT interval, which cannot see relevant items never
    drawn, falls short (documented in benchmarks/results) -- and it is no wider than the
    posterior mean's actual error calls for.  400 runs: the slow twin.  Both in the slow
    tier (28 s, mostly compilation; the default tier's budget went to the stage kernel's
    tests, ``tests/test_kernel.py``); the finite-pool posterior's calibration stays in
    the default tier (``tests/test_posterior.py::test_sbc_coverage_fast``: it needs only the
    labeled counts, whatever design chose the items)."""
    _check_bayesian_interval(100)


@pytest.mark.slow
def test_default_adaptive_bayesian_interval_covers_400_runs():
    _check_bayesian_interval(400)
