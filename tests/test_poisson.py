"""Tests for bayes_eval.poisson (seed paper 000: §2.2, §3, App. B.1, App. E)."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, stats

from bayes_eval import poisson as P


# ------------------------------------------------------------------------------------
# F1 written here (not from bayes_eval.measures): l = [y f, (y + f) / 2], g = R0 / R1
# ------------------------------------------------------------------------------------
def f1_rows(y, f):
    y = np.asarray(y, float)
    f = np.asarray(f, float)
    return np.stack([y * f, 0.5 * (y + f)], axis=-1)


def f1_g(r):
    return r[0] / r[1]


def synthetic_pool(rng, n, prevalence=0.1, mu1=1.5, mu0=-2.5):
    """Imbalanced pool: labels, model probabilities (logits N(mu_y, 1.5)) and predictions."""
    y = (rng.random(n) < prevalence).astype(float)
    logit = np.where(y == 1, rng.normal(mu1, 1.5, n), rng.normal(mu0, 1.5, n))
    prob = 1.0 / (1.0 + np.exp(-logit))
    f = (prob > 0.5).astype(float)
    return y, f, prob


def f1_deviation(f, prob, lam=0.9, floor=0.02):
    """h_n = sqrt(<(Dg l_n)^2>) under lambda-mixed probabilities (000 eq. 12-14)."""
    pa = np.asarray(P.lambda_mix(prob, lam))
    r_a = np.stack([np.mean(pa * f), np.mean(0.5 * (pa + f))])
    F_a = r_a[0] / r_a[1]
    dev1 = f - F_a * 0.5 * (1 + f)  # y = 1
    dev0 = -F_a * 0.5 * f  # y = 0
    h = np.sqrt(pa * dev1**2 + (1 - pa) * dev0**2)
    return np.maximum(h, floor * h.max())  # keep support everywhere


# ------------------------------------------------------------------------------------
# water-filling
# ------------------------------------------------------------------------------------
def _check_kkt(h, b, budget, sizes=None):
    h = np.asarray(h, float)
    b = np.asarray(b, float)
    w = np.ones_like(h) if sizes is None else np.asarray(sizes, float)
    pos = h > 0
    support = w[pos].sum()
    assert np.all(b >= 0) and np.all(b <= 1)
    assert np.all(b[~pos] == 0)
    np.testing.assert_allclose((w * b).sum(), min(budget, support), rtol=1e-12)
    if budget >= support:
        assert np.all(b[pos] == 1)
        return
    interior = pos & (b < 1)
    ratio = h[interior] / b[interior]
    c = ratio.mean()
    # KKT: h_n / b_n = c on unsaturated items, h_n / b_n = h_n >= c on saturated ones.
    np.testing.assert_allclose(ratio, c, rtol=1e-10)
    assert np.all(h[pos & (b == 1)] >= c * (1 - 1e-12))


@pytest.mark.parametrize("n, budget", [(1, 0.5), (5, 2.0), (50, 10.0), (50, 3.5), (1000, 100.0),
                                       (1000, 999.0), (7, 7.0), (7, 30.0)])
def test_water_fill_kkt(n, budget):
    rng = np.random.default_rng(n * 1000 + int(budget * 10))
    h = rng.lognormal(0.0, 2.0, n)  # heavy tail -> some saturation
    h[rng.random(n) < 0.1] = 0.0
    h[: n // 5] = h[0]  # ties
    b = P.water_fill(h, budget)
    _check_kkt(h, b, budget)


def test_water_fill_proportional_when_unsaturated():
    """000 Alg. 3 line 3-4: if M max(h) <= sum(h), b = M h / sum(h)."""
    h = np.linspace(1.0, 2.0, 20)
    b = P.water_fill(h, 5.0)
    np.testing.assert_allclose(b, 5.0 * h / h.sum(), rtol=1e-13)


def test_water_fill_extreme_range():
    h = np.array([1e-9, 1e-6, 1e-3, 1.0, 1e3, 1e6])
    for budget in [0.5, 1.5, 2.5, 4.0, 5.5]:
        b = P.water_fill(h, budget)
        _check_kkt(h, b, budget)


def test_water_fill_matches_slsqp():
    rng = np.random.default_rng(7)
    for _ in range(12):
        n = 8
        h = rng.lognormal(0.0, 1.5, n) + 0.01
        budget = rng.uniform(1.0, 6.0)

        def obj(b):
            return np.sum(h**2 / b)

        def jac(b):
            return -(h**2) / b**2

        res = optimize.minimize(
            obj, np.full(n, budget / n), jac=jac, method="SLSQP",
            bounds=[(1e-6, 1.0)] * n,
            constraints=[{"type": "eq", "fun": lambda b: b.sum() - budget,
                          "jac": lambda b: np.ones_like(b)}],
            options={"ftol": 1e-15, "maxiter": 2000},
        )
        ours = float(P.water_fill_objective(h, P.water_fill(h, budget)))
        assert ours <= res.fun * (1 + 1e-9)
        assert abs(ours - res.fun) <= 1e-6 * res.fun


def test_water_fill_groups_equals_expanded():
    rng = np.random.default_rng(3)
    k = 40
    sizes = rng.integers(0, 12, k)
    for budget in [1.0, 17.5, 60.0, 200.0, 1e4]:
        h = rng.lognormal(0.0, 1.5, k)
        h[::7] = 0.0
        bg = np.asarray(P.water_fill_groups(h, sizes, budget))
        be = np.asarray(P.water_fill(np.repeat(h, sizes), budget))
        np.testing.assert_allclose(np.repeat(bg, sizes), be, rtol=1e-12, atol=1e-15)
        _check_kkt(h[sizes > 0], bg[sizes > 0], budget, sizes[sizes > 0])


def test_water_fill_jit_and_vmap():
    rng = np.random.default_rng(4)
    h = rng.lognormal(0.0, 1.0, 200)
    sizes = rng.integers(1, 50, 200).astype(float)
    budgets = jnp.array([5.0, 50.0, 500.0])
    f = jax.jit(jax.vmap(P.water_fill_groups, in_axes=(None, None, 0)))
    out = f(h, sizes, budgets)
    for i, m in enumerate(np.asarray(budgets)):
        np.testing.assert_allclose(out[i], P.water_fill_groups(h, sizes, m), rtol=1e-13)
    # under jit, budget <= 0 gives all-zero b instead of an error
    assert np.all(np.asarray(jax.jit(P.water_fill)(h, -1.0)) == 0)


def test_water_fill_budget_exceeds_support():
    h = np.array([0.0, 1.0, 2.0, 0.0, 3.0])
    b = np.asarray(P.water_fill(h, 4.0))
    np.testing.assert_array_equal(b, [0, 1, 1, 0, 1])
    bg = np.asarray(P.water_fill_groups(h, [5, 2, 1, 1, 1], 10.0))
    np.testing.assert_array_equal(bg, [0, 1, 1, 0, 1])


@pytest.mark.parametrize(
    "h, budget, match",
    [([1.0, np.nan, 2.0], 1.0, r"h\[1\]"), ([1.0, 2.0, -0.5], 1.0, r"h\[2\].*negative"),
     ([1.0, 2.0], 0.0, "budget"), ([1.0, 2.0], -3.0, "budget"), ([1.0, 2.0], np.inf, "budget")],
)
def test_water_fill_bad_input(h, budget, match):
    with pytest.raises(ValueError, match=match):
        P.water_fill(np.array(h), budget)
    with pytest.raises(ValueError, match=match):
        P.water_fill_groups(np.array(h), np.ones(len(h)), budget)


def test_water_fill_groups_bad_sizes():
    with pytest.raises(ValueError, match=r"sizes\[1\]"):
        P.water_fill_groups([1.0, 2.0], [1.0, -1.0], 1.0)
    with pytest.raises(ValueError, match="shape"):
        P.water_fill_groups([1.0, 2.0], [1.0, 1.0, 1.0], 1.0)


# ------------------------------------------------------------------------------------
# Horvitz-Thompson: exact enumeration
# ------------------------------------------------------------------------------------
def _all_masks(n):
    return np.array(list(itertools.product([False, True], repeat=n)))


def _mask_probs(masks, b):
    return np.prod(np.where(masks, b, 1 - b), axis=1)


@pytest.mark.parametrize("extreme", [False, True])
def test_ht_unbiased_by_enumeration(extreme):
    rng = np.random.default_rng(11)
    n = 10
    y = rng.random(n) < 0.4
    f = rng.random(n) < 0.4
    L = f1_rows(y, f)
    p = rng.dirichlet(np.ones(n))
    b = rng.uniform(0.05, 1.0, n)
    b[[2, 5]] = 1.0
    if extreme:  # importance weights p_n / b_n up to ~1e5 (DESIGN §3, "Precision")
        b[[0, 1, 3]] = [1e-6, 1e-5, 1e-4]
    masks = _all_masks(n)
    probs = _mask_probs(masks, b)
    assert abs(probs.sum() - 1) < 1e-13
    est = np.asarray(jax.vmap(P.ht_risk, in_axes=(None, None, None, 0))(L, p, b, masks))
    covs = np.asarray(jax.vmap(P.ht_covariance, in_axes=(None, None, None, 0))(L, p, b, masks))
    truth = p @ L
    mean = probs @ est
    np.testing.assert_allclose(mean, truth, rtol=0, atol=1e-12)
    dev = est - truth
    exact_var = np.einsum("k,ki,kj->ij", probs, dev, dev)
    closed = np.einsum("n,ni,nj->ij", (1 / b - 1) * p**2, L, L)
    np.testing.assert_allclose(exact_var, closed, rtol=1e-11, atol=1e-12)
    # the variance estimate (000 eq. 28, vector form) is unbiased for the exact variance
    np.testing.assert_allclose(np.einsum("k,kij->ij", probs, covs), exact_var, rtol=1e-11,
                               atol=1e-12)
    # permuting the pool changes nothing
    perm = rng.permutation(n)
    np.testing.assert_allclose(P.ht_risk(L[perm], p[perm], b[perm], masks[77][perm]),
                               est[77], rtol=1e-14)


def test_ht_stochastic_oracle_variance_by_enumeration():
    """000 eq. 27 form: E over labels and samples of the estimate equals Var(R_hat)."""
    rng = np.random.default_rng(12)
    n = 6
    f = (rng.random(n) < 0.5).astype(float)
    pi = rng.uniform(0.1, 0.9, n)  # P(y = 1)
    p = rng.dirichlet(np.ones(n))
    b = rng.uniform(0.2, 1.0, n)
    mean_rows = pi[:, None] * f1_rows(1, f) + (1 - pi[:, None]) * f1_rows(0, f)
    target = p @ mean_rows
    labels = _all_masks(n)
    masks = _all_masks(n)
    risk_fn = jax.vmap(P.ht_risk, in_axes=(None, None, None, 0))
    cov_fn = jax.vmap(P.ht_covariance, in_axes=(None, None, None, 0, None))
    m1 = np.zeros(2)
    m2 = np.zeros((2, 2))
    ecov = np.zeros((2, 2))
    pm = _mask_probs(masks, b)
    for yl in labels:
        py = np.prod(np.where(yl, pi, 1 - pi))
        L = f1_rows(yl, f)
        est = np.asarray(risk_fn(L, p, b, masks))
        cv = np.asarray(cov_fn(L, p, b, masks, mean_rows))
        m1 += py * (pm @ est)
        d = est - target
        m2 += py * np.einsum("k,ki,kj->ij", pm, d, d)
        ecov += py * np.einsum("k,kij->ij", pm, cv)
    np.testing.assert_allclose(m1, target, atol=1e-12)
    np.testing.assert_allclose(ecov, m2, atol=1e-12)


def test_ht_full_labeling_is_exact():
    rng = np.random.default_rng(5)
    y, f, _ = synthetic_pool(rng, 3000)
    L = f1_rows(y, f)
    p = rng.dirichlet(np.ones(3000))
    b = np.ones(3000)
    b[rng.random(3000) < 0.3] = 0.0
    L_zero = L.copy()
    L_zero[b == 0] = 0.0  # items that can never be drawn have zero loss rows here
    s = b > 0
    r = P.ht_risk(L_zero, p, b, s)
    np.testing.assert_allclose(r, p @ L_zero, rtol=1e-14)
    est = P.ht_estimate(f1_g, L_zero, p, b, s)
    assert float(est.covariance) == 0.0
    np.testing.assert_allclose(est.value, (p @ L_zero)[0] / (p @ L_zero)[1], rtol=1e-14)


def test_ht_ignores_unsampled_rows_and_default_weights():
    L = np.array([[1.0, 1.0], [np.nan, np.nan], [0.0, 0.5]])
    b = np.array([0.5, 0.0, 0.25])
    s = np.array([True, False, True])
    r = np.asarray(P.ht_risk(L, None, b, s))
    np.testing.assert_allclose(r, (L[0] / 0.5 + L[2] / 0.25) / 3)
    c = np.asarray(P.ht_covariance(L, None, b, s))
    assert np.all(np.isfinite(c))
    # 1-D loss rows give scalars
    assert np.ndim(P.ht_risk(L[:, 1], None, b, s)) == 0
    assert np.ndim(P.ht_covariance(L[:, 1], None, b, s)) == 0


def test_delta_method_matches_paper_eq28():
    """Dg Cov Dg^T for g = R0/R1 equals 000 eq. 28-29 written with f - F g."""
    rng = np.random.default_rng(6)
    n = 500
    y, f, prob = synthetic_pool(rng, n, prevalence=0.2)
    L = f1_rows(y, f)
    b = P.water_fill(f1_deviation(f, prob), 80.0)
    s = np.asarray(P.poisson_sample(jax.random.key(1), b))
    est = P.ht_estimate(f1_g, L, None, b, s)
    F = float(est.value)
    bb = np.asarray(b)
    x = L[:, 0] - F * L[:, 1]
    ny = np.sum(s / np.where(s, bb, 1) * L[:, 1])  # N mu_y, 000 eq. 29
    paper = np.sum(s / np.where(s, bb, 1) * (1 / np.where(s, bb, 1) - 1) * x**2) / ny**2
    np.testing.assert_allclose(float(est.covariance), paper, rtol=1e-12)
    # finite differences for the Jacobian
    r = np.asarray(est.risk)
    eps = 1e-7
    J = np.array([(f1_g(r + eps * e) - f1_g(r - eps * e)) / (2 * eps) for e in np.eye(2)])
    np.testing.assert_allclose(float(est.covariance), J @ np.asarray(est.risk_covariance) @ J,
                               rtol=1e-6)
    # vector-valued g gives a matrix
    G = P.delta_method_covariance(lambda r: jnp.stack([r[0] / r[1], r[1]]), est.risk,
                                  est.risk_covariance)
    assert G.shape == (2, 2)
    np.testing.assert_allclose(G[0, 0], est.covariance, rtol=1e-13)


# ------------------------------------------------------------------------------------
# Monte Carlo: ratio estimator and interval coverage
# ------------------------------------------------------------------------------------
@jax.jit
def _f1_runs(L, b, keys):
    def one(key):
        s = P.poisson_sample(key, b)
        est = P.ht_estimate(f1_g, L, None, b, s)
        # negative control: a ratio that ignores the inclusion probabilities
        naive = jnp.sum(jnp.where(s, L[:, 0], 0)) / jnp.sum(jnp.where(s, L[:, 1], 0))
        return est.value, est.covariance, s.sum(), naive

    return jax.vmap(one)(keys)


def _simulate_f1(seed, n_items, budget, reps, **pool):
    rng = np.random.default_rng(seed)
    y, f, prob = synthetic_pool(rng, n_items, **pool)
    L = jnp.asarray(f1_rows(y, f))
    truth = float(L[:, 0].sum() / L[:, 1].sum())
    b = P.water_fill(f1_deviation(f, prob), budget)
    out = _f1_runs(L, b, jax.random.split(jax.random.key(seed), reps))
    return (truth,) + tuple(np.asarray(o) for o in out)


def test_ht_ratio_f1_monte_carlo_mean():
    truth, vals, _, sizes, naive = _simulate_f1(seed=21, n_items=3000, budget=150.0, reps=500)
    assert abs(sizes.mean() - 150) < 3
    se = vals.std(ddof=1) / np.sqrt(len(vals))
    assert abs(vals.mean() - truth) < 3 * se
    # negative control: ignoring the inclusion probabilities fails the same check
    assert abs(naive.mean() - truth) > 3 * naive.std(ddof=1) / np.sqrt(len(naive))


def _coverage(truth, vals, vars_):
    lo_n, hi_n = P.normal_interval(vals, vars_)
    cov_normal = np.mean((np.asarray(lo_n) <= truth) & (truth <= np.asarray(hi_n)))
    lo_b, hi_b = P.beta_interval(vals, vars_)
    cov_beta = np.mean((lo_b <= truth) & (truth <= hi_b))
    return cov_normal, cov_beta


def test_interval_coverage_f1():
    # 10% positives, F1 ~ 0.77; true coverage ~0.94 (normal) / ~0.945 (Beta) by 4000 repeats
    truth, vals, vars_, sizes, _ = _simulate_f1(seed=33, n_items=3000, budget=300.0, reps=500)
    assert abs(sizes.mean() - 300) < 4
    cov_normal, cov_beta = _coverage(truth, vals, vars_)
    assert 0.90 <= cov_normal <= 0.99, cov_normal
    assert 0.90 <= cov_beta <= 0.99, cov_beta


@pytest.mark.xfail(strict=True, reason="known small-sample under-coverage: ~1 false negative "
                   "expected in the sample, the HT ratio is skewed (true coverage ~0.895)")
def test_interval_coverage_f1_few_errors():
    # 5% positives and a sharp classifier: ~14 false negatives in the pool, each with
    # b ~ 0.085, so ~30% of samples contain none; the estimate is then too high and its
    # variance estimate too small.
    truth, vals, vars_, _, _ = _simulate_f1(seed=33, n_items=3000, budget=300.0, reps=500,
                                            prevalence=0.05, mu1=2.0, mu0=-3.5)
    assert min(_coverage(truth, vals, vars_)) >= 0.93


# ------------------------------------------------------------------------------------
# Beta-fitted limits (000 §2.2)
# ------------------------------------------------------------------------------------
def test_beta_interval_matches_scipy():
    m = np.array([0.3, 0.05, 0.97, 0.5])
    v = np.array([0.001, 0.0004, 0.0002, 0.05])
    a, b, valid = P.beta_moment_fit(m, v)
    assert valid.all()
    np.testing.assert_allclose(stats.beta.mean(a, b), m, rtol=1e-12)
    np.testing.assert_allclose(stats.beta.var(a, b), v, rtol=1e-10)
    lo, hi = P.beta_interval(m, v, alpha=0.1)
    np.testing.assert_allclose(lo, stats.beta.ppf(0.05, a, b), rtol=1e-10)
    np.testing.assert_allclose(hi, stats.beta.ppf(0.95, a, b), rtol=1e-10)
    assert np.all((lo < m) & (m < hi))


def test_beta_interval_fallbacks():
    # invalid fit: variance too large -> clipped normal interval
    lo, hi = P.beta_interval(0.5, 0.3)
    assert float(lo) == 0.0 and float(hi) == 1.0
    # boundary means
    lo, hi = P.beta_interval(0.0, 0.01)
    assert float(lo) == 0.0 and abs(float(hi) - 1.959963984540054 * 0.1) < 1e-12
    lo, hi = P.beta_interval(1.0, 0.0)
    assert float(lo) == 1.0 and float(hi) == 1.0
    # zero variance -> point interval; tiny variance -> close to normal
    lo, hi = P.beta_interval(0.4, 0.0)
    assert float(lo) == float(hi) == 0.4
    lo, hi = P.beta_interval(0.4, 1e-12)
    np.testing.assert_allclose([lo, hi], [0.4 - 1.96e-6, 0.4 + 1.96e-6], rtol=1e-4)
    # NaN in, NaN out
    lo, hi = P.beta_interval(np.nan, 0.1)
    assert np.isnan(lo) and np.isnan(hi)
    lo, hi = P.normal_interval(0.9, 0.01, clip=None)
    assert float(hi) > 1.0


# ------------------------------------------------------------------------------------
# online multi-round (000 App. E)
# ------------------------------------------------------------------------------------
def _enumerate_rounds(L, h, budgets, rule_mix):
    """Enumerate every outcome of an adaptive multi-round Poisson design.

    Round r samples among unlabeled items with b^r = water_fill_groups(h_r, unlabeled, M_r),
    where h_r depends on the labels already observed.  Returns outcomes as
    (prob, label_round, b_drawn).
    """
    n = len(h)
    out = []

    def rec(r, rounds, bdrawn, prob):
        if r == len(budgets):
            out.append((prob, rounds.copy(), bdrawn.copy()))
            return
        unl = rounds < 0
        seen = L[~unl, 0].sum()
        h_r = h * (1.0 + rule_mix * seen * np.arange(1, n + 1) / n)
        b = np.asarray(P.water_fill_groups(h_r, unl.astype(float), budgets[r]))
        idx = np.flatnonzero(unl)
        for m in itertools.product([False, True], repeat=len(idx)):
            m = np.array(m, bool)
            pr = prob * np.prod(np.where(m, b[idx], 1 - b[idx]))
            if pr == 0:
                continue
            rr, bd = rounds.copy(), bdrawn.copy()
            rr[idx[m]] = r
            bd[idx[m]] = b[idx[m]]
            rec(r + 1, rr, bd, pr)

    rec(0, -np.ones(n, int), np.ones(n), 1.0)
    return out


@pytest.mark.parametrize("weights", [None, (0.25, 0.25, 0.5)])
def test_online_rounds_unbiased_by_enumeration(weights):
    rng = np.random.default_rng(17)
    n = 6
    y = rng.random(n) < 0.5
    f = rng.random(n) < 0.5
    L = f1_rows(y, f)
    p = rng.dirichlet(np.ones(n))
    h = rng.uniform(0.2, 1.0, n)
    outcomes = _enumerate_rounds(L, h, budgets=[1.5, 1.0, 2.0], rule_mix=0.8)
    probs = np.array([o[0] for o in outcomes])
    rounds = np.array([o[1] for o in outcomes])
    bd = np.array([o[2] for o in outcomes])
    assert abs(probs.sum() - 1) < 1e-12
    w = None if weights is None else jnp.asarray(weights)
    fn = jax.vmap(lambda r, b: P.online_ht_risk(L, p, b, r, 3, w))
    est, cov = fn(jnp.asarray(rounds), jnp.asarray(bd))
    est, cov = np.asarray(est), np.asarray(cov)
    truth = p @ L
    np.testing.assert_allclose(probs @ est, truth, atol=1e-12)
    d = est - truth
    np.testing.assert_allclose(np.einsum("k,kij->ij", probs, cov),
                               np.einsum("k,ki,kj->ij", probs, d, d), atol=1e-12)


def test_online_matches_combine_rounds_and_single_round():
    rng = np.random.default_rng(19)
    n = 200
    y, f, prob = synthetic_pool(rng, n, prevalence=0.2)
    L = f1_rows(y, f)
    p = rng.dirichlet(np.ones(n))
    h = f1_deviation(f, prob)
    rounds = -np.ones(n, int)
    bdrawn = np.ones(n)
    K, F, C = [], [], []
    key = jax.random.key(5)
    for r in range(3):
        unl = rounds < 0
        b = np.asarray(P.water_fill_groups(h, unl.astype(float), 20.0))
        key, sub = jax.random.split(key)
        s = np.asarray(P.poisson_sample(sub, b)) & unl
        K.append(p[~unl] @ L[~unl])
        F.append(np.asarray(P.ht_risk(L, p, b, s)))
        C.append(np.asarray(P.ht_covariance(L, p, b, s)))
        rounds[s] = r
        bdrawn[s] = b[s]
    for w in [None, jnp.array([0.2, 0.3, 0.5])]:
        r1, c1 = P.combine_rounds(np.array(K), np.array(F), np.array(C), w)
        r2, c2 = P.online_ht_risk(L, p, bdrawn, rounds, 3, w)
        np.testing.assert_allclose(r1, r2, rtol=1e-12)
        np.testing.assert_allclose(c1, c2, rtol=1e-12, atol=1e-18)
    # one round == plain HT
    r3, c3 = P.online_ht_risk(L, p, bdrawn, np.where(rounds == 0, 0, -1), 1)
    s0 = rounds == 0
    np.testing.assert_allclose(r3, P.ht_risk(L, p, bdrawn, s0), rtol=1e-13)
    np.testing.assert_allclose(c3, P.ht_covariance(L, p, bdrawn, s0), rtol=1e-13)


# ------------------------------------------------------------------------------------
# sampling
# ------------------------------------------------------------------------------------
def test_sequential_poisson_fixed_size_and_inclusion():
    rng = np.random.default_rng(23)
    n_items, n = 400, 20
    h = rng.lognormal(0.0, 1.0, n_items)
    h[:3] = 200.0  # three certainty items
    b = P.water_fill(h, n)
    bb = np.asarray(b)
    assert np.sum(bb == 1) == 3
    reps = 4000
    draw = jax.jit(jax.vmap(lambda k: P.sequential_poisson_sample(k, b, n)))
    idx = np.asarray(draw(jax.random.split(jax.random.key(0), reps)))
    assert idx.shape == (reps, n)
    srt = np.sort(idx, axis=1)
    assert np.all(np.diff(srt, axis=1) > 0)  # distinct
    counts = np.bincount(idx.ravel(), minlength=n_items) / reps
    np.testing.assert_array_equal(counts[:3], 1.0)  # certainty items always drawn
    small = bb < 0.1
    assert small.sum() > 300
    # inclusion frequencies close to b for small b (approximate; exact in the limit)
    err = counts[small] - bb[small]
    se = np.sqrt(bb[small] * (1 - bb[small]) / reps)
    assert np.mean(np.abs(err) <= 4 * se + 0.05 * bb[small]) > 0.97
    assert abs(counts[small].sum() - bb[small].sum()) < 0.05 * bb[small].sum()


def test_sequential_poisson_bad_input():
    b = jnp.array([0.5, 0.5, 0.0, 1.0])
    with pytest.raises(ValueError, match="n = 4"):
        P.sequential_poisson_sample(jax.random.key(0), b, 4)
    with pytest.raises(ValueError, match=r"b\[0\]"):
        P.sequential_poisson_sample(jax.random.key(0), jnp.array([1.5, 0.5]), 1)
    idx = np.asarray(P.sequential_poisson_sample(jax.random.key(0), b, 3))
    assert sorted(idx.tolist()) == [0, 1, 3]


def test_poisson_sample_frequencies():
    b = jnp.array([0.0, 0.01, 0.2, 0.5, 0.9, 1.0])
    reps = 20000
    masks = np.asarray(P.poisson_sample(jax.random.key(2), jnp.broadcast_to(b, (reps, 6))))
    freq = masks.mean(axis=0)
    bb = np.asarray(b)
    assert freq[0] == 0 and freq[-1] == 1
    assert np.all(np.abs(freq - bb) <= 5 * np.sqrt(bb * (1 - bb) / reps) + 1e-12)


def test_poisson_sample_counts():
    reps = 2000
    sizes = np.array([1000, 50, 7, 0, 3])
    bc = np.array([0.02, 0.5, 1.0, 0.3, 0.0])
    counts = np.asarray(P.poisson_sample_counts(
        jax.random.key(3), np.broadcast_to(bc, (reps, 5)), np.broadcast_to(sizes, (reps, 5))))
    assert np.all(counts[:, 2] == 7) and np.all(counts[:, 3] == 0) and np.all(counts[:, 4] == 0)
    sd = np.sqrt(sizes * bc * (1 - bc) / reps)
    assert np.all(np.abs(counts.mean(axis=0) - sizes * bc)[:2] <= 5 * sd[:2])


def test_lambda_mix():
    np.testing.assert_allclose(P.lambda_mix(jnp.array([0.0, 1.0])), [0.05, 0.95])
    np.testing.assert_allclose(P.lambda_mix(jnp.array([0.0, 1.0]), 0.5, uniform=0.25),
                               [0.125, 0.625])


def test_all_exports():
    for name in P.__all__:
        assert hasattr(P, name)
