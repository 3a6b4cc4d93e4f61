"""The companion model of the adaptive designs (bayes_eval.designs.sweep_share).

The Dirichlet tree of 001 §4 alone collapses on balanced pools (its EM fit splits the
classes along the score axis like an unsupervised mixture), and AIS / adaptive Poisson
designs fed by it are then far worse than passive sampling.  With the calibrated companion
model they are not, and on the shared entity-resolution pools they stay as they were
(benchmarks/results/suite_f1_*.md).  These tests check the mixture's weight, that the
designs stay unbiased and exact with it, and -- with the tree-only designs as the negative
control -- that it fixes the balanced case.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval import measures as M
from bayes_eval.cells import build_cells
from bayes_eval.cli import main as cli_main
from bayes_eval.designs import resolve_companion, sweep_share
from bayes_eval.pool import Pool, demo_pool
from bayes_eval.session import Session, SessionError
from bayes_eval.simulate import run_simulation, summarize
from bayes_eval.strata import stratify


def balanced_pool(n=10_000, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.5).astype(np.int32)
    s = np.where(y == 1, rng.normal(1.0, 1.0, n), rng.normal(-1.0, 1.0, n)) - 1.0
    return Pool.from_arrays(scores=s, preds=(s >= 0).astype(np.int32), labels=y, name="balanced")


def test_sweep_share_is_labels_over_expected_relevant_items():
    pool = demo_pool(n_items=2000, positive_rate=0.05, seed=0)
    cells, _ = build_cells(pool, stratify(pool, 16), M.f1())
    x, c = cells.loss.shape[:2]
    pi = jnp.broadcast_to(jnp.array([0.9, 0.1]), (x, c))
    nz = np.asarray(jnp.any(cells.loss != 0, axis=-1))
    relevant = float(np.sum(np.asarray(cells.size)[:, None] * np.asarray(pi) * nz))
    zero = jnp.zeros((x, c))
    np.testing.assert_allclose(float(sweep_share(cells, zero, pi, 50.0)), 50.0 / relevant, rtol=1e-12)
    # monotone in the budget, capped at 1 once the labels can cover every item that can matter
    shares = [float(sweep_share(cells, zero, pi, b)) for b in (10.0, 100.0, relevant, 10 * relevant)]
    assert shares == sorted(shares) and shares[-2] == shares[-1] == 1.0
    # labeled items count at their labels: labeling every item gives 1
    assert float(jax.jit(sweep_share)(cells, cells.truth, pi)) == 1.0


def test_resolve_companion():
    assert resolve_companion("auto", 2, "ais") == "calibrated"
    assert resolve_companion("auto", 2, "poisson-adaptive") == "calibrated"
    assert resolve_companion("auto", 3, "ais") is None  # the calibrated model is binary
    assert resolve_companion("auto", 2, "is") is None
    assert resolve_companion("none", 2, "ais") is None
    with pytest.raises(ValueError, match="binary"):
        resolve_companion("calibrated", 3, "ais")
    with pytest.raises(ValueError, match="adaptive designs"):
        resolve_companion("calibrated", 2, "passive")
    with pytest.raises(ValueError, match="companion must be"):
        resolve_companion("oracle", 2, "ais")


def _totals_and_f1():
    f1 = M.f1()
    return M.Measure("f1_totals", f1.loss, lambda R: jnp.stack([R[0], R[1], R[0] / R[1]]), 2,
                     ("tp", "den", "f1"), f1.pattern)


@pytest.mark.parametrize("estimator", ["ht", "difference"])
def test_adaptive_poisson_with_companion_unbiased_and_exact(estimator):
    """Companion mixture, HT rounds (the default) or the difference estimator with the
    scaled model prediction, quadratic round weights: totals within 3 SE of the truth
    over 400 repeats; the estimate exact once the budget covers every item that can
    matter."""
    pool = demo_pool(n_items=400, positive_rate=0.1, seed=1)
    res, _ = run_simulation(pool, _totals_and_f1(), "poisson-adaptive", budget=450, batch=50, repeats=400,
                            seed=0, n_strata=8, depth=3, checkpoints=(100, 200, 400), companion="calibrated",
                            estimator=estimator)
    truth, v = res.true_value, res.checkpoint_value
    for i in range(2):
        for j in range(2):
            se = v[:, i, j].std(ddof=1) / np.sqrt(v.shape[0])
            assert abs(v[:, i, j].mean() - truth[j]) <= 3 * se + 1e-12, (i, j)
    np.testing.assert_allclose(v[:, 2, :], np.broadcast_to(truth, v[:, 2, :].shape), rtol=1e-12)


@pytest.mark.slow  # 22 s: a measurement (the suite benchmarks it); moved out of the default tier at stop 25
def test_companion_fixes_balanced_pool_and_tree_only_is_the_negative_control():
    """On a balanced pool (10,000 items, half positive, 500 labels, 80 repeats) AIS and
    the adaptive Poisson design with the companion are within 2x of passive sampling's
    MSE of F1 (measured: 0.9x and 0.45x); fed by the Dirichlet tree alone they are >= 5x
    worse (measured: 18x and 23x)."""
    pool = balanced_pool()
    kw = dict(budget=500, batch=50, repeats=80, seed=0, checkpoints=(500,), n_strata=64, depth=6, track_kl=False)

    def mse(design, **extra):
        res, _ = run_simulation(pool, M.f1(), design, **kw, **extra)
        return summarize(res)[0]["mse"]

    passive = mse("passive")
    for design in ("ais", "poisson-adaptive"):
        assert mse(design, companion="auto") <= 2.0 * passive, design
        assert mse(design, companion="none") >= 5.0 * passive, design


def test_session_records_the_companion(tmp_path):
    pool = demo_pool(n_items=3000, positive_rate=0.02, seed=3)
    s = Session.create(str(tmp_path / "a.db"), pool, "f1", "ais", seed=0)
    assert s.config["design"]["companion"] == "calibrated"
    s.close()
    s = Session.create(str(tmp_path / "b.db"), pool, "f1", "poisson-adaptive", seed=0, companion="none")
    dk = s.config["design"]
    assert dk["companion"] is None and dk["estimator"] == "ht"
    s.close()
    s = Session.create(str(tmp_path / "c.db"), pool, "f1", "poisson-adaptive", seed=0)
    assert s.config["design"]["companion"] == "calibrated" and s.config["design"]["estimator"] == "ht"
    s.close()
    with pytest.raises(SessionError, match="adaptive designs"):
        Session.create(str(tmp_path / "d.db"), pool, "f1", "is", seed=0, companion="calibrated")


def test_cli_companion_flag(capsys):
    rc = cli_main(["simulate", "demo", "--design", "ais", "--budget", "100", "--repeats", "2", "--bayes", "no",
                   "--checkpoints", "100", "--companion", "none", "--format", "json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["companion"] is None
    rc = cli_main(["simulate", "demo", "--design", "passive", "--budget", "100", "--repeats", "2",
                   "--checkpoints", "100", "--companion", "calibrated"])
    assert rc == 2
    assert "adaptive designs" in capsys.readouterr().err


@pytest.mark.slow   # two ~8 s compiles; the difference estimator's range failure, a regression study
def test_companion_rounds_keep_f1_in_range_on_a_rare_miscalibrated_pool():
    """The first rounds follow the companion while it is still (nearly) its prior.  On the
    demo pool (0.2% positive, scores far from calibrated) the difference estimator then
    gave F1 estimates from -1900 to 19 at 50-100 labels; the default HT rounds keep every
    estimate in [0, 1] (their totals are non-negative) -- and the difference estimator is
    the negative control.  Both measured on F1 *not* projected onto what the labels allow
    (``bayes_eval.feasible``), which puts any estimate in range."""
    pool = demo_pool(n_items=20_000, positive_rate=0.002, seed=0)
    kw = dict(budget=100, batch=50, repeats=200, seed=0, checkpoints=(50, 100), companion="calibrated")
    raw_f1 = M.f1()._replace(fractional=False)
    res, _ = run_simulation(pool, raw_f1, "poisson-adaptive", **kw)
    v = res.checkpoint_value[..., 0]
    v = v[np.isfinite(v)]
    assert v.size > 0 and v.min() >= 0.0 and v.max() <= 1.0
    res, _ = run_simulation(pool, raw_f1, "poisson-adaptive", estimator="difference", **kw)
    v = res.checkpoint_value[..., 0]
    v = v[np.isfinite(v)]
    assert v.min() < 0.0 or v.max() > 1.0
