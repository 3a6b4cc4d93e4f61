"""Estimators: importance-weighted risk, delta-method covariance, intervals, ellipsoid."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval.estimators import (
    delta_cov, ellipsoid, in_ellipsoid, is_estimate, is_estimate_draws, normal_interval, stratified_estimate,
)


def f1_g(r):
    return jnp.atleast_1d(r[0] / r[1])


def test_delta_cov_matches_closed_form_and_finite_differences():
    r = jnp.array([0.003, 0.004])
    cov_r = jnp.array([[2e-7, 1e-7], [1e-7, 3e-7]])
    got = np.asarray(delta_cov(f1_g, r, cov_r))[0, 0]
    jac = np.array([1 / r[1], -r[0] / r[1] ** 2])
    closed = jac @ np.asarray(cov_r) @ jac
    np.testing.assert_allclose(got, closed, rtol=1e-12)
    h = 1e-9
    fd = np.array([(f1_g(r + h * e)[0] - f1_g(r - h * e)[0]) / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(fd @ np.asarray(cov_r) @ fd, closed, rtol=1e-5)


def test_is_estimate_of_the_risk_is_unbiased_by_enumeration():
    """E_q[R̂] = R for any q with the right support (001 eq. 1), R̂ computed by the library's
    ``is_estimate_draws`` (g = identity: the risk itself) and its expectation taken exactly,
    by enumerating every single draw and every ordered pair of draws from q.  The negative
    control: weights that ignore q (w = 1) are biased."""
    rng = np.random.default_rng(0)
    n = 12
    loss = rng.integers(0, 2, (n, 2)).astype(float)
    loss[0] = [1.0, 1.0]  # a row with non-zero loss where q is smallest
    p = rng.random(n) + 0.5
    p /= p.sum()
    q = rng.random(n) + 0.1
    q[0] = 0.01
    q /= q.sum()
    w = p / q
    truth = p @ loss
    ident = lambda r: r  # noqa: E731

    def est(idx, weights):
        idx = np.asarray(idx)
        return np.asarray(is_estimate_draws(ident, loss[idx], weights[idx], weights[idx]).value)

    one = np.array([est([x], w) for x in range(n)])
    np.testing.assert_allclose(one, w[:, None] * loss, rtol=1e-12)
    np.testing.assert_allclose(q @ one, truth, rtol=1e-12)
    pairs = [(x, z) for x in range(n) for z in range(n)]
    two = np.array([est(pair, w) for pair in pairs])
    prob = np.array([q[x] * q[z] for x, z in pairs])
    np.testing.assert_allclose(prob @ two, truth, rtol=1e-12)
    # negative control: unweighted draws from q estimate q @ loss, not R
    biased = q @ np.array([est([x], np.ones(n)) for x in range(n)])
    assert np.max(np.abs(biased - truth)) > 0.05


def test_draw_and_cell_level_agree():
    rng = np.random.default_rng(1)
    loss = rng.integers(0, 2, (50, 2)).astype(float)
    w = rng.random(50) * 100
    pq = rng.random(50) * 50
    a = is_estimate_draws(f1_g, loss, w, pq)
    # aggregate identical rows into cells
    keys = loss[:, 0] * 2 + loss[:, 1]
    cells = np.unique(keys)
    closs = np.array([loss[keys == k][0] for k in cells])
    # cell-level needs per-cell p/q_N constant: use a constant here
    b1 = is_estimate_draws(f1_g, loss, w, np.full(50, 3.0), variance="final")
    cw = np.array([w[keys == k].sum() for k in cells])
    b2 = is_estimate(f1_g, jnp.asarray(closs), jnp.asarray(cw), jnp.full(len(cells), 3.0), 50.0)
    np.testing.assert_allclose(b1.value, b2.value, rtol=1e-12)
    np.testing.assert_allclose(b1.cov, b2.cov, rtol=1e-10)
    # the martingale variance (each draw's own squared weight) aggregates by Σ w² per cell
    cw2 = np.array([(w[keys == k] ** 2).sum() for k in cells])
    b3 = is_estimate(f1_g, jnp.asarray(closs), jnp.asarray(cw), None, 50.0, w2sum=jnp.asarray(cw2))
    np.testing.assert_allclose(a.value, b3.value, rtol=1e-12)
    np.testing.assert_allclose(a.cov, b3.cov, rtol=1e-10)
    assert np.isfinite(a.value).all()


def test_undefined_estimate_is_nan_not_error():
    est = is_estimate_draws(f1_g, np.zeros((5, 2)), np.ones(5), np.ones(5))
    assert np.isnan(est.value).all()


def test_passive_clt_interval_coverage_for_a_mean():
    """Normal intervals of a proportion from passive draws cover ~95% (binomial band)."""
    key = jax.random.PRNGKey(0)
    p_true = 0.3

    def one(k):
        y = jax.random.bernoulli(k, p_true, (400,)).astype(jnp.float64)[:, None]
        est = is_estimate_draws(lambda r: r, y, jnp.ones(400), jnp.ones(400))
        lo, hi = normal_interval(est.value, est.cov)
        return (lo[0] <= p_true) & (p_true <= hi[0])

    cover = np.asarray(jax.vmap(one)(jax.random.split(key, 1000))).mean()
    assert 0.93 <= cover <= 0.97


def test_ellipsoid_contains_center_and_covers():
    rng = np.random.default_rng(3)
    hits = 0
    reps = 400
    mu = np.array([0.2, 0.5])
    for _ in range(reps):
        x = rng.multivariate_normal(mu, [[1.0, 0.3], [0.3, 0.5]], size=200)
        m = x.mean(0)
        c, cov, r2 = ellipsoid(m, np.cov(x.T) / 200, 200)
        assert in_ellipsoid(m, c, cov, r2)
        hits += in_ellipsoid(mu, c, cov, r2)
    assert 0.92 <= hits / reps <= 0.98
    with pytest.raises(ValueError, match="needs more than"):
        ellipsoid(np.zeros(3), np.eye(3), 3)


def test_stratified_estimate_exact_when_each_stratum_is_pure():
    # two strata, each with constant loss: the post-stratified estimate is exact
    loss = jnp.array([[1.0], [0.0]])
    est = stratified_estimate(lambda r: r, loss, jnp.array([3.0, 7.0]), jnp.array([0, 1]), jnp.array([0.1, 0.9]), 2)
    np.testing.assert_allclose(est.value, [0.1])
    np.testing.assert_allclose(est.cov, 0.0, atol=1e-15)


def test_labels_reused_for_a_second_measure():
    """Draws taken for F1 (with δ = 0.1 of p(x) mixed in, 001 §3.3.1) also estimate
    accuracy without bias: mean over repeats within 3 standard errors of the truth."""
    from bayes_eval import measures as M

    rng = np.random.default_rng(5)
    n = 3000
    y = (rng.random(n) < 0.05).astype(int)
    s = np.where(y == 1, rng.normal(1, 1, n), rng.normal(-2, 1, n))
    f = (s >= 0).astype(int)
    feats = M.features_from_arrays(f, s)
    f1, acc = M.f1(), M.accuracy()
    loss_f1 = np.asarray(f1.loss(feats))[np.arange(n), y]
    loss_acc = np.asarray(acc.loss(feats))[np.arange(n), y]
    prob = 1 / (1 + np.exp(-s))
    q = 0.9 * (prob * (1 + f)) / (prob * (1 + f)).sum() + 0.1 / n
    p = np.full(n, 1 / n)
    truth = float(M.value(acc, feats, y)[0])
    ests = []
    for _ in range(300):
        idx = rng.choice(n, 400, p=q)
        w = p[idx] / q[idx]
        ests.append(float(is_estimate_draws(acc.g, loss_acc[idx], w, w).value[0]))
        assert np.isfinite(is_estimate_draws(f1.g, loss_f1[idx], w, w).value).all()
    ests = np.array(ests)
    assert abs(ests.mean() - truth) <= 3 * ests.std(ddof=1) / np.sqrt(ests.size)
