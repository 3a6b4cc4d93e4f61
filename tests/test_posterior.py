"""The finite-pool posterior of G (DESIGN.md §4; :mod:`bayes_eval.posterior`).

* With every item labeled the posterior collapses onto the true value, for both oracle
  models (the calibrated Beta-binomial and the Dirichlet tree of 001 §4).
* Simulation-based calibration of the whole pipeline (DESIGN.md §8): pools drawn from
  the calibrated model's own prior, a two-stage design whose second stage depends on
  the labels of the first (ignorable, 001 §4.2), the posterior of the simulation core
  (``calibrated_model(...).sample`` + :func:`finite_pool_posterior`), 95% equal-tailed
  intervals; they must cover the truth in 90–99% of the repeats.  A negative control
  (π fixed at the classifier's probabilities, labels ignored) must fail.
* The building blocks: the labeled table, π given (a, b, κ), replicated labels.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval._config import jit_run_often
from bayes_eval import measures as M
from bayes_eval.cells import build_cells
from bayes_eval.models import calibrated as cal
from bayes_eval.models import classifier_scores, dirichlet_tree
from bayes_eval.pool import Pool
from bayes_eval.posterior import (
    calibrated_pi,
    equal_tailed,
    finite_pool_posterior,
    labeled_table,
    leaf_counts,
    pool_posterior_from_pi,
    ppc_tail_probabilities,
    replicate_labeled,
)
from bayes_eval.strata import Strata
from conftest import calibrated_prior_curve

MEASURE = M.stack(M.f1(), M.precision(), M.recall())


# ---------------------------------------------------------------------------------------
# a small pool with one score per stratum (cells = strata)
# ---------------------------------------------------------------------------------------
def _stratum_pool(k=16, per=150, zlo=-4.0, zhi=2.5, labels=None):
    z = np.linspace(zlo, zhi, k)
    scores = np.repeat(z, per)
    pool = Pool.from_arrays(scores=scores, labels=labels, threshold=0)
    idx = np.repeat(np.arange(k), per).astype(np.int32)
    strata = Strata(index=idx, sizes=np.full(k, per), lower=z, upper=z, method="manual")
    cells, item_cell = build_cells(pool, strata, MEASURE, labels=labels)
    return pool, strata, cells, item_cell


def test_labeled_table_counts_and_errors():
    item_cell = np.array([0, 0, 1, 2, 2, 2])
    tab = labeled_table(item_cell, 3, 2, [0, 3, 4, 4], [1, 0, 1, 1])
    np.testing.assert_array_equal(tab, [[0, 1], [0, 0], [1, 1]])
    with pytest.raises(ValueError, match="row 4 is labeled 1 and, at position 2, 0"):
        labeled_table(item_cell, 3, 2, [0, 4, 4], [1, 1, 0])
    with pytest.raises(ValueError, match="position 1: row 9 is outside"):
        labeled_table(item_cell, 3, 2, [0, 9], [1, 1])
    with pytest.raises(ValueError, match="position 0 is 2, outside 0..1"):
        labeled_table(item_cell, 3, 2, [0], [2])
    with pytest.raises(ValueError, match="2 labeled items but 1 labels"):
        labeled_table(item_cell, 3, 2, [0, 1], [1])


def test_calibrated_pi_is_the_exact_beta_conditional():
    lp = jnp.array([[0.9, 0.1], [0.2, 0.8]])
    counts = jnp.array([[30.0, 2.0], [1.0, 5.0]])
    n = 20_000
    a, b, kappa = jnp.full(n, 0.3), jnp.full(n, 1.2), jnp.full(n, 15.0)
    pi = np.asarray(calibrated_pi(jax.random.PRNGKey(0), lp, counts, a, b, kappa))
    z = np.log(np.array([0.1, 0.8]) / np.array([0.9, 0.2]))
    mu = 1 / (1 + np.exp(-(0.3 + 1.2 * z)))
    al, be = 15 * mu + np.array([2.0, 5.0]), 15 * (1 - mu) + np.array([30.0, 1.0])
    mean = al / (al + be)
    sd = np.sqrt(mean * (1 - mean) / (al + be + 1))
    assert np.all(np.abs(pi[..., 1].mean(0) - mean) < 5 * sd / np.sqrt(n)), (pi[..., 1].mean(0), mean)
    np.testing.assert_allclose(pi.sum(-1), 1.0)


def test_replicated_labels_keep_the_labeled_totals():
    counts = jnp.array([[3.0, 1.0], [0.0, 0.0], [10.0, 5.0]])
    pi = jnp.broadcast_to(jnp.array([0.7, 0.3]), (500, 3, 2))
    rep = np.asarray(replicate_labeled(jax.random.PRNGKey(1), counts, pi))
    np.testing.assert_array_equal(rep.sum(-1), np.broadcast_to([4.0, 0.0, 15.0], (500, 3)))
    assert abs(rep[:, 2, 1].mean() - 4.5) < 4 * np.sqrt(15 * 0.21 / 500)
    tail = ppc_tail_probabilities(np.asarray(counts), rep)
    assert tail["p_ge"][1, 1] == 1.0 and tail["p_le"][1, 1] == 1.0  # nothing labeled: 0 vs 0
    assert np.all((tail["p_ge"] + tail["p_le"]) >= 1.0)


# ---------------------------------------------------------------------------------------
# (a) every item labeled: the posterior is a point mass at the truth;
# (b) simulation-based calibration on pools from the calibrated model's prior.
# One compiled runner serves both (the calibrated model's sampler takes ~10 s to compile).
# ---------------------------------------------------------------------------------------
def _sbc_runner(k=16, per=150, n_draws=400):
    """A jitted function of per-repeat (keys, p1, stage2) -> dict of per-repeat results.

    Per repeat: (a, b, log κ) and the curve's band offsets d from the prior of the
    calibrated model the registry's posterior uses (``bands=BANDS``), π_k ~ Beta(κμ_k,
    κ(1−μ_k)) with μ_k = sigmoid(a + b z_k + d_band(k)), labels ~ Bernoulli(π_k) per item; stage 1 labels a Poisson sample at rate
    ``p1`` (scores only), stage 2 labels ≈ ``stage2`` more items with stratum rates
    ∝ sqrt(r(1−r)), r the smoothed share of positives seen in stage 1 (a design that
    depends on the labels seen: ignorable, 001 §4.2).  Then the finite-pool posterior of
    G as the simulation core computes it (``calibrated_model(...).sample`` +
    :func:`finite_pool_posterior`), and — the negative control — the same with π fixed at
    the classifier's probabilities (``classifier_scores``: labels ignored).
    """
    pool, strata, cells, item_cell = _stratum_pool(k, per)
    from bayes_eval.cells import leaf_probs

    lp = leaf_probs(cells, k)
    z = np.asarray(cal.score_logit(lp))
    model, control = cal.calibrated_model(lp, bands=cal.BANDS, prior=cal.POSTERIOR_PRIOR), classifier_scores(lp)
    prior_curve = calibrated_prior_curve(z)
    stratum_of_item = jnp.asarray(strata.index)
    cell_of_item = jnp.asarray(item_cell)
    n_items, x = item_cell.size, cells.n_cells
    g = MEASURE.g

    def one(key, p1, stage2):
        ks = jax.random.split(key, 10)
        mu, kappa = prior_curve(ks[:3], jax.random.fold_in(ks[0], 1))
        pi = jax.random.beta(ks[3], kappa * mu, kappa * (1 - mu))
        y = (jax.random.uniform(ks[4], (n_items,)) < pi[stratum_of_item]).astype(jnp.float64)
        onehot = jnp.stack([1 - y, y], -1)
        truth_cells = jax.ops.segment_sum(onehot, cell_of_item, num_segments=x)
        true_g = g(jnp.einsum("x,xc,xcd->d", cells.weight, truth_cells, cells.loss))
        l1 = jax.random.uniform(ks[5], (n_items,)) < p1
        n1 = jax.ops.segment_sum(l1.astype(jnp.float64), stratum_of_item, num_segments=k)
        pos1 = jax.ops.segment_sum(l1 * y, stratum_of_item, num_segments=k)
        r = (pos1 + 0.5) / (n1 + 1.0)
        w = jnp.sqrt(r * (1 - r))
        p2 = jnp.clip(stage2 * w / jnp.sum(per * w), 0.0, 1.0)
        l2 = (~l1) & (jax.random.uniform(ks[6], (n_items,)) < p2[stratum_of_item])
        lab = (l1 | l2).astype(jnp.float64)
        labeled = jax.ops.segment_sum(onehot * lab[:, None], cell_of_item, num_segments=x)
        out = {"truth": true_g, "labels": lab.sum()}
        counts, unl = leaf_counts(cells, labeled, k)
        pi_bayes = model.sample(ks[7], counts, unl, n_draws)["pi"]
        pi_control = jnp.broadcast_to(control.predictive(control.init_state()), pi_bayes.shape)  # labels ignored
        # one completion for both (one compiled copy of the multinomial sampler)
        post = pool_posterior_from_pi(ks[8], g, cells, labeled, jnp.concatenate([pi_bayes, pi_control]), k)
        for name, value in (("bayes", post.value[:n_draws]), ("control", post.value[n_draws:])):
            lo, hi = equal_tailed(value, 0.95)
            v = jnp.where(jnp.isfinite(value), value, jnp.inf)
            # randomized rank (ties split uniformly): uniform on 0..n_draws when calibrated
            u = jax.random.uniform(ks[9], true_g.shape)
            rank = jnp.sum(v < true_g, 0) + jnp.floor(u * (jnp.sum(v == true_g, 0) + 1))
            out[name] = {"lo": lo, "hi": hi, "covers": (lo <= true_g) & (true_g <= hi),
                         "defined": jnp.isfinite(true_g) & jnp.isfinite(lo) & jnp.isfinite(hi), "rank": rank}
        return out

    return jit_run_often(jax.vmap(one))   # at XLA level >= 1: 220 posteriors run long once compiled


N_FULL, N_SBC = 20, 200


@pytest.fixture(scope="module")
def sbc_runner():
    """200 draws per posterior: the fast tier's coverage bands need no more (the slow
    tier's rank test takes 400)."""
    return _sbc_runner(n_draws=200)


@pytest.fixture(scope="module")
def sbc_batch(sbc_runner):
    """One call (one compilation): N_FULL fully labeled pools, then N_SBC SBC repeats."""
    n = N_FULL + N_SBC
    p1 = np.r_[np.ones(N_FULL), np.full(N_SBC, 0.03)]
    stage2 = np.r_[np.zeros(N_FULL), np.full(N_SBC, 150.0)]
    out = sbc_runner(jax.random.split(jax.random.PRNGKey(2024), n), p1, stage2)
    return jax.tree_util.tree_map(np.asarray, out)


def _coverage(res):
    covers, defined = np.asarray(res["covers"]), np.asarray(res["defined"])
    return np.array([covers[defined[:, j], j].mean() for j in range(covers.shape[1])]), defined.sum(0)


def _part(out, sl):
    return jax.tree_util.tree_map(lambda a: a[sl], out)


def test_full_labels_collapse_to_truth_calibrated(sbc_batch):
    """Every item labeled (p1 = 1): both ends of the interval are the true value."""
    out = _part(sbc_batch, slice(0, N_FULL))
    assert np.all(out["labels"] == 16 * 150)
    t = out["truth"]
    ok = np.isfinite(t)
    assert ok.sum() >= 2 * N_FULL
    for name in ("bayes", "control"):
        np.testing.assert_allclose(out[name]["lo"][ok], t[ok], rtol=0, atol=1e-12)
        np.testing.assert_allclose(out[name]["hi"][ok], t[ok], rtol=0, atol=1e-12)


def test_full_labels_collapse_to_truth_dirichlet_tree():
    rng = np.random.default_rng(0)
    k, per = 16, 40
    z = np.repeat(np.linspace(-4.0, 2.5, k), per)
    y = (rng.random(z.size) < 1 / (1 + np.exp(-(z - 0.5)))).astype(int)
    pool, strata, cells, item_cell = _stratum_pool(k, per, labels=y)
    truth = np.asarray(pool.true_value(MEASURE))
    lab = labeled_table(item_cell, cells.n_cells, 2, np.arange(z.size), y)
    from bayes_eval.cells import leaf_probs

    model = dirichlet_tree(leaf_probs(cells, k), depth=4, branching=2)
    post = finite_pool_posterior(jax.random.PRNGKey(3), model, cells, jnp.asarray(lab), k, MEASURE.g, n_draws=50,
                                 state=model.init_state())  # Gibbs from the prior mode: no EM to compile
    np.testing.assert_allclose(np.asarray(post.value), np.broadcast_to(truth, (50, truth.size)), rtol=0, atol=1e-12)
    assert float(jnp.abs(post.unlabeled_counts).max()) == 0.0


def test_sbc_coverage_fast(sbc_batch):
    """200 pools from the prior, ≈ 220 labels each of 2400 items: every component of
    (F1, precision, recall) covered in 90–99% (binomial SE ≈ 1.5%); the negative control
    (π at the classifier's probabilities) covers < 85% — the check has power."""
    out = _part(sbc_batch, slice(N_FULL, None))
    cov, n = _coverage(out["bayes"])
    assert np.all(n >= 180), n
    assert np.all((cov >= 0.90) & (cov <= 0.99)), (cov, n)
    assert 150 < float(np.mean(out["labels"])) < 300
    cov_control, _ = _coverage(out["control"])
    assert np.all(cov_control < 0.85), cov_control


@pytest.mark.slow
def test_sbc_coverage_and_ranks_slow():
    """1980 pools from the prior (DESIGN.md §8: simulation-based calibration).

    G on a finite pool is discrete, so the truth falls on an end of the equal-tailed
    interval in a few % of the repeats (precision: ~10%) and a calibrated posterior has
    P(lo < G < hi) ≤ 95% ≤ P(lo ≤ G ≤ hi).  Checked: closed coverage ≥ 0.935 and open
    coverage ≤ 0.965 (±3 binomial SE), and the randomized ranks of the truth among the
    draws (ties split uniformly) uniform — chi-square over 10 bins, p > 0.001.
    Measured (seeds 100..108): closed 0.963 / 0.968 / 0.957, open 0.937 / 0.861 / 0.889,
    rank p-values 0.036 / 0.29 / 0.45 for F1 / precision / recall.
    """
    from scipy import stats

    sbc_runner = _sbc_runner(n_draws=400)
    n = N_FULL + N_SBC
    p1, stage2 = np.full(n, 0.03), np.full(n, 150.0)
    outs = [jax.tree_util.tree_map(np.asarray, sbc_runner(jax.random.split(jax.random.PRNGKey(100 + s), n), p1,
                                                          stage2)) for s in range(9)]
    res = {key: np.concatenate([o["bayes"][key] for o in outs]) for key in ("covers", "defined", "rank", "lo", "hi")}
    truth = np.concatenate([o["truth"] for o in outs])
    cov, n_ok = _coverage(res)
    assert np.all(n_ok >= 1800), n_ok
    assert np.all(cov >= 0.935), (cov, n_ok)
    for j in range(truth.shape[1]):
        d = res["defined"][:, j]
        t, lo, hi = truth[d, j], res["lo"][d, j], res["hi"][d, j]
        assert np.mean((lo < t) & (t < hi)) <= 0.965, j
        r = res["rank"][d, j]
        hist = np.bincount(np.minimum((r / 401 * 10).astype(int), 9), minlength=10)
        p = stats.chisquare(hist).pvalue
        assert p > 1e-3, (j, hist, p)


# ---------------------------------------------------------------------------------------
# posterior units: the calibrated model's class rate is per cell, not per stratum
# ---------------------------------------------------------------------------------------
def _straddling_pool():
    """Seven negative strata and one stratum that straddles the threshold: 20 items
    predicted positive (all positive) and 20 predicted negative (all negative).  Labeled:
    20 items of each negative stratum, all 20 predicted positives and 10 of the predicted
    negatives -- what a design that favours predicted positives leaves (AIS for F1)."""
    levels = np.linspace(-5.0, -1.5, 7)
    scores = np.r_[np.repeat(levels, 100), np.full(20, 1.5), np.full(20, -0.5)]
    labels = np.r_[np.zeros(700, int), np.ones(20, int), np.zeros(20, int)]
    idx = np.r_[np.repeat(np.arange(7), 100), np.full(40, 7)].astype(np.int32)
    pool = Pool.from_arrays(scores=scores, labels=labels, threshold=0)
    strata = Strata(index=idx, sizes=np.bincount(idx), lower=np.r_[levels, -0.5], upper=np.r_[levels, 1.5],
                    method="manual")
    cells, item_cell = build_cells(pool, strata, MEASURE)
    rows = np.r_[np.concatenate([np.arange(s * 100, s * 100 + 20) for s in range(7)]), np.arange(700, 730)]
    lab = jnp.asarray(labeled_table(item_cell, cells.n_cells, 2, rows, labels[rows]))
    return pool, cells, lab


def test_calibrated_posterior_per_cell_does_not_spread_a_strata_labels_over_its_other_cell():
    """Per stratum, the straddling stratum's 20 positives of 30 labels put ~6 positives
    among its 10 unlabeled predicted negatives, and the F1 interval misses the truth (1.0:
    nothing hidden) -- the negative control.  Per cell (the default units), the predicted
    negatives' rate comes from their own 10 negative labels and the curve: under 1.5
    expected, and the interval holds the truth."""
    from bayes_eval.cells import posterior_units
    from bayes_eval.posterior import units_for_model

    pool, cells, lab = _straddling_pool()
    truth = float(np.asarray(pool.true_value(MEASURE))[0])
    assert truth == 1.0 and units_for_model("calibrated") == "cell" and units_for_model("dirichlet-tree") == "stratum"
    out = {}
    for by in ("cell", "stratum"):
        u = posterior_units(cells, 8, by)
        model = cal.calibrated_model(u.probs)

        def draw(key, labeled, u=u, model=model):   # jit-compiled: one compilation instead of op-by-op dispatch
            cnt, unl = leaf_counts(u.cells, labeled, u.n_units)
            return finite_pool_posterior(key, model, u.cells, labeled, u.n_units, MEASURE.g, n_draws=400,
                                         state=model.fit(model.init_state(), cnt, unl))

        post = jax.jit(draw)(jax.random.PRNGKey(0), lab)
        hidden = np.asarray(post.unlabeled_counts[..., 1])[:, np.asarray(u.stratum) == 7].sum(1)
        lo, hi = equal_tailed(post.value, 0.95)
        out[by] = (hidden.mean(), float(lo[0]), float(hi[0]))
    assert out["cell"][0] < 1.5 and out["cell"][1] <= truth <= out["cell"][2] + 1e-12, out
    assert out["stratum"][0] > 4.0 and out["stratum"][2] < truth, out


def test_posterior_units_group_cells_by_stratum_pattern_and_weight():
    """Units are the (stratum, loss pattern, weight) groups: the cells of a design without
    a per-item proposal, and the prior-keyed cells of static IS merged back; their
    probabilities are the item-weighted means; by stratum they are the strata."""
    from bayes_eval.cells import leaf_probs, posterior_units, prior_key
    from bayes_eval.pool import demo_pool
    from bayes_eval.strata import stratify

    pool = demo_pool()
    strata = stratify(pool, 64, keep_empty=True)
    plain, _ = build_cells(pool, strata, M.f1())
    fine, _ = build_cells(pool, strata, M.f1(), extra_key=prior_key(pool))
    u_plain, u_fine = posterior_units(plain, 64), posterior_units(fine, 64)
    assert u_plain.n_units == plain.n_cells < fine.n_cells and u_fine.n_units == u_plain.n_units
    for u, c in ((u_plain, plain), (u_fine, fine)):
        unit = np.asarray(u.cells.stratum)
        size_u = np.bincount(unit, weights=np.asarray(c.size))
        np.testing.assert_allclose(size_u, np.bincount(np.asarray(u_plain.cells.stratum), weights=np.asarray(plain.size)))
        # every unit lies in one stratum and holds one loss pattern
        assert np.all(u.stratum[unit] == np.asarray(c.stratum))
        loss = np.asarray(c.loss).reshape(c.n_cells, -1)
        for j in range(u.n_units):
            assert np.all(loss[unit == j] == loss[unit == j][0])
        np.testing.assert_allclose(u.probs * size_u[:, None],
                                   np.stack([np.bincount(unit, weights=np.asarray(c.size) * np.asarray(c.prior)[:, y])
                                             for y in range(2)], 1), rtol=1e-12)
    np.testing.assert_allclose(u_fine.probs, u_plain.probs, rtol=1e-9, atol=1e-15)
    by_stratum = posterior_units(fine, 64, "stratum")
    assert by_stratum.n_units == 64 and np.array_equal(np.asarray(by_stratum.cells.stratum), np.asarray(fine.stratum))
    np.testing.assert_allclose(by_stratum.probs, leaf_probs(fine, 64))
    with pytest.raises(ValueError, match="by 'cell' or by 'stratum'"):
        posterior_units(plain, 64, "item")
