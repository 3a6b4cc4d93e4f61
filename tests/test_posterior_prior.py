"""The posterior model's prior on the calibration curve's slope (``models/calibrated.py``:
``POSTERIOR_PRIOR``, b ~ N(1, 2²) since stop 85 (2.5² from stop 83), against the designs' companion's
``PRIOR``, b ~ N(1, 1.5²)).

A classifier whose scores are under-confident -- the log-odds of a positive 3 × its margin --
is a curve the model can fit, but a prior that holds the slope near 1 flattens the fitted
curve where the labels are few (below the threshold, where AIS draws least), and the flatter
curve puts more positives among the unlabeled low-score items: recall and F1 sit low and the
Bayesian interval misses (0.86 of 100 AIS runs at 150 and 300 labels with sd 1.5; 0.89 / 0.88
with sd 2, 0.92 / 0.89 with sd 2.5: ``benchmarks/results/slope_prior.md``).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from bayes_eval.models import calibrated as cal


def _steep_units():
    """37 units of 80 items, margins z from -5 to 4, true rate sigmoid(3z − 1.44); 4 labels in
    each unit with z ≥ 0 (their positives the expected number, rounded), none below: the labels
    a design that targets the predicted positives leaves."""
    z = np.linspace(-5.0, 4.0, 37)
    true_rate = 1.0 / (1.0 + np.exp(-(3.0 * z - 1.44)))
    labeled = z >= 0.0
    n = np.where(labeled, 4, 0)
    n1 = np.round(n * true_rate)
    counts = jnp.asarray(np.c_[n - n1, n1], dtype=jnp.float64)
    unlabeled = jnp.asarray(80 - n, dtype=jnp.float64)
    leaf_probs = np.c_[1.0 / (1.0 + np.exp(z)), 1.0 / (1.0 + np.exp(-z))]
    hidden_truth = float(np.sum(np.where(labeled, 0, 80) * true_rate))
    return leaf_probs, counts, unlabeled, labeled, hidden_truth


def _hidden_positives(prior):
    """Posterior draws of the slope b and of the positives among the unlabeled units' items."""
    lp, counts, unl, labeled, _ = _steep_units()
    model = cal.calibrated_model(lp, bands=cal.BANDS, prior=prior)

    @jax.jit   # one program (fit and sample) instead of the many small ones run eagerly: faster to compile
    def draws(key, counts, unl):
        s = model.sample(key, counts, unl, 2000, state=model.fit(model.init_state(), counts, unl))
        return s["b"], s["pi"]

    b, pi = draws(jax.random.PRNGKey(0), counts, unl)
    pi = np.asarray(pi)[..., 1]
    return np.asarray(b), (pi * np.where(labeled, 0, 80)).sum(-1)


def test_the_posterior_prior_lets_the_labels_set_a_steep_slope():
    hidden_truth = _steep_units()[-1]
    b_post, hidden_post = _hidden_positives(cal.POSTERIOR_PRIOR)
    b_comp, hidden_comp = _hidden_positives(cal.PRIOR)
    # the companion's prior pulls the slope toward 1 and the hidden positives up (its median
    # 26 where the truth is 15.8); the posterior model's follows the labels (15).  Mean b: 2.78
    # under the companion's, 3.11 under sd 2 (0.4 more under sd 2.5)
    assert b_post.mean() > b_comp.mean() + 0.2
    assert abs(np.log(np.median(hidden_post) / hidden_truth)) < np.log(1.35)
    assert abs(np.log(np.median(hidden_post) / hidden_truth)) < abs(np.log(np.median(hidden_comp) / hidden_truth))
    # and the truth stays inside the posterior's central 95%
    lo, hi = np.quantile(hidden_post, [0.025, 0.975])
    assert lo < hidden_truth < hi


def test_the_registry_posterior_model_and_the_companion_keep_their_priors():
    from bayes_eval.models import registry

    lp = _steep_units()[0]
    post = registry.make_oracle_model("calibrated", lp)
    comp = registry.make_companion_model("calibrated", lp)
    # the state before any label is the prior's mode and covariance: the slope's sd is read off it
    assert np.sqrt(np.asarray(post.init_state().cov)[..., 1, 1]).max() == pytest.approx(cal.POSTERIOR_PRIOR["b"][1])
    assert np.sqrt(np.asarray(comp.init_state().cov)[1, 1]) == pytest.approx(cal.PRIOR["b"][1])
    assert cal.POSTERIOR_PRIOR["b"][1] > cal.PRIOR["b"][1]


def _steep_pool(n=3000, seed=1):
    """The pool of ``benchmarks/slope_prior.py``: 5% positive, margin ~ N(3y − 2, 1), so the
    log-odds of a positive are exactly 3·margin − 1.44."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.05).astype(np.int8)
    s = rng.normal(size=n) - 2 + 3.0 * y
    return pd.DataFrame({"item": np.arange(n), "score": s, "pred": (s >= 0).astype(np.int8), "label": y})


@pytest.mark.slow
def test_the_bayesian_interval_covers_on_an_under_confident_classifiers_pool(monkeypatch):
    """100 AIS runs of 150 labels on a pool whose classifier is under-confident (log-odds 3 × the
    margin): the Bayesian interval of F1 under the posterior model's slope prior holds the truth in
    ≥ 0.84 of them, and in at least as many as under the companion's firmer prior on the same runs
    (the designs do not read the posterior model, so the labels are the same).  Not ≥ 0.95 − 3 SE:
    this pool is the price of the prior's sd (README, "Which model"; ``benchmarks/results/slope_prior.md``):
    measured at stop 86 on these runs 0.87 under sd 2 (the benchmark's runs of 300 labels, read at
    150: 0.89 under 2, 0.92 under stop 83's 2.5, 0.86 under the companion's 1.5)."""
    from bayes_eval import measures
    from bayes_eval.pool import Pool
    from bayes_eval.results import summarize
    from bayes_eval.simulate import run_simulation

    pool = Pool.from_frame(_steep_pool())

    def coverage():
        res, _ = run_simulation(pool, measures.f1(), "ais", budget=150, batch=50, repeats=100, seed=3,
                                checkpoints=(150,), bayes=True, bayes_draws=1000)
        (row,) = summarize(res)
        return row["coverage_bayes"]

    posterior = coverage()
    # the posterior model built afresh under the companion's prior: its programs are traced again
    monkeypatch.setitem(cal.POSTERIOR_PRIOR, "b", cal.PRIOR["b"])
    firmer = coverage()
    assert posterior >= 0.84, (posterior, firmer)
    assert posterior >= firmer, (posterior, firmer)
