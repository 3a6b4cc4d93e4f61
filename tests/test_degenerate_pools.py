"""Ties and degenerate pools (issue 14): one distinct score, three distinct scores, every
item predicted one class.  The Bayesian interval must still cover the truth over repeats.

Before strata were split by predicted class, a pool whose scores were all tied had one
stratum holding both predicted classes; the oracle models hold p(y) constant inside a
stratum, so the positives found among the predicted positives were spread over the
predicted negatives too: after 40 labels the Bayesian interval was [0.022, 0.049] for a true
F1 of 0.611 (coverage 0 here).

Coverage is checked over 100 repeats against a band from its binomial standard error
(nominal 0.95: 0.95 − 3·0.022 ≈ 0.88), with a negative control: the same intervals shrunk to
a quarter of their width must miss.
"""
import numpy as np
import pytest

from bayes_eval import measures as M
from bayes_eval.pool import Pool, demo_pool
from bayes_eval.simulate import run_simulation

REPEATS = 100
FLOOR = 0.95 - 3 * np.sqrt(0.95 * 0.05 / REPEATS)


def _case(name):
    d = demo_pool(3000, positive_rate=0.03, seed=1)
    s, pred, y = np.asarray(d.scores[:, 0]), np.asarray(d.preds[:, 0]), np.asarray(d.labels)
    if name == "tied":
        return Pool.from_arrays(scores=np.zeros_like(s), preds=pred, labels=y, name=name)
    if name == "three-scores":
        return Pool.from_arrays(scores=np.digitize(s, [-2.5, 0.0]).astype(float), preds=pred, labels=y, name=name)
    return Pool.from_arrays(scores=s, preds=np.ones_like(pred), labels=y, name=name)  # all predicted positive


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tied", "three-scores", "all-positive"])
def test_bayesian_interval_covers_on_degenerate_pools(name):
    pool = _case(name)
    res, _ = run_simulation(pool, M.f1(), "ais", budget=200, batch=20, repeats=REPEATS, seed=0,
                            checkpoints=(100, 200), bayes=True, track_kl=False)
    t = float(res.true_value[0])
    lo, hi = res.bayes_lower[..., 0], res.bayes_upper[..., 0]
    assert np.isfinite(lo).all() and np.isfinite(hi).all()
    cover = ((lo <= t) & (t <= hi)).mean(axis=0)
    assert (cover >= FLOOR).all(), f"{name}: Bayesian coverage {cover} (truth {t:.3f})"
    mid, half = (lo + hi) / 2, (hi - lo) / 8
    control = ((mid - half <= t) & (t <= mid + half)).mean(axis=0)
    assert (control < FLOOR).any(), f"{name}: a quarter-width interval should miss (got {control})"


@pytest.mark.slow
def test_all_predicted_negative_pool_is_exact_zero():
    """Every item predicted negative: F1 is 0 whatever the labels (no true positive can
    exist), and both intervals say exactly that."""
    d = demo_pool(3000, positive_rate=0.03, seed=1)
    pool = Pool.from_arrays(scores=np.asarray(d.scores[:, 0]), preds=np.zeros(3000, int), labels=np.asarray(d.labels))
    res, _ = run_simulation(pool, M.f1(), "ais", budget=100, batch=20, repeats=10, seed=0,
                            checkpoints=(100,), bayes=True, track_kl=False)
    assert float(res.true_value[0]) == 0.0
    np.testing.assert_allclose(res.checkpoint_value[..., 0], 0.0)
    np.testing.assert_allclose(res.bayes_upper[..., 0], 0.0)


def test_tied_session_of_the_issue(tmp_path):
    """The scenario of issue 14: every score tied, 40 labels in a session.  It reported F1
    1.0000 with a Bayesian interval [0.022, 0.049] for a true F1 of 0.7; now the posterior
    puts the positives it finds where the predictions say (the strata split by predicted
    class) and its interval holds the truth."""
    from bayes_eval.session import Session

    pool = _case("tied")
    truth = float(pool.true_value(M.f1())[0])
    s = Session.create(str(tmp_path / "tie.db"), pool, "f1", "ais", seed=0)
    assert s.cells.n_cells >= 2
    while s.n_labels < 40:
        b = s.next_batch(10)
        s.add_labels(b["item"], pool.labels[pool.index_of(b["item"])])
    bi = s.bayesian_interval()
    lo, hi = float(bi["lower"][0]), float(bi["upper"][0])
    assert lo <= truth <= hi, (lo, hi, truth)
    s.close()
