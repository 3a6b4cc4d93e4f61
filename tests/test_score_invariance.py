"""The estimate does not depend on how the scores are written (issue 14).

The same pool with its scores replaced by a strictly increasing transform -- the
probability ``sigmoid(margin)``, the rank 1..N -- read with the default score-kind
detection, gives the margin run's F1 MSE within Monte Carlo error for ``ais`` and
``poisson-adaptive``.  Probabilities give the margin run's strata and prior, hence the same
estimates; ranks carry no calibration (their prior comes from the rank and the decision
boundary), so their MSE is compared with a band from the Monte Carlo error of both.  The
control -- probabilities read as margins, as releases before score kinds did -- must fall
outside that band (it was 12-5000x worse), so the test can fail.
"""
import numpy as np
import pandas as pd
import pytest

from bayes_eval import measures as M
from bayes_eval.pool import Pool, demo_pool, sigmoid
from bayes_eval.simulate import run_simulation
from conftest import shared_pool_path


def _ranks(s):
    r = np.empty(s.size)
    r[np.argsort(s, kind="stable")] = np.arange(1, s.size + 1)
    return r


def _run(s, pred, y, design, repeats, kind=None, budget=1000, checkpoints=(500, 1000)):
    pool = Pool.from_arrays(scores=s, preds=pred, labels=y, score_kind=kind)
    res, _ = run_simulation(pool, M.f1(), design, budget=budget, batch=50, repeats=repeats, seed=0,
                            checkpoints=checkpoints, bayes=False, track_kl=False)
    return res.checkpoint_value[:, :, 0], float(res.true_value[0])


def _log_mse_and_se(v, t):
    """log MSE over repeats and its standard error (delta method on the mean of squared errors)."""
    e2 = (v - t) ** 2
    e2 = e2[np.isfinite(e2)]
    m = e2.mean()
    return np.log(m), e2.std(ddof=1) / (m * np.sqrt(e2.size))


def _check(s, pred, y, design, repeats, **kw):
    base, t = _run(s, pred, y, design, repeats, **kw)
    prob, _ = _run(sigmoid(s), pred, y, design, repeats, **kw)
    # probability scores: the margin's strata and prior -> the same estimates
    np.testing.assert_allclose(prob, base, rtol=1e-7, atol=1e-12)
    rank, _ = _run(_ranks(s), pred, y, design, repeats, **kw)
    old, _ = _run(sigmoid(s), pred, y, design, repeats, kind="margin", **kw)
    control_worse = []
    for c in range(base.shape[1]):
        lb, sb = _log_mse_and_se(base[:, c], t)
        lr, sr = _log_mse_and_se(rank[:, c], t)
        band = 3.0 * np.hypot(sb, sr)
        # ranks: no worse than the margin beyond Monte Carlo error (better is allowed)
        assert lr - lb <= band, f"{design} checkpoint {c}: rank MSE {np.exp(lr):.3g} vs margin {np.exp(lb):.3g}"
        lo, so = _log_mse_and_se(old[:, c], t)
        control_worse.append(lo - lb > 3.0 * np.hypot(sb, so))
    # the control (probabilities read as margins) is worse early on (on dblp-acm, AIS catches
    # up by 2000 labels: 0.93x there in benchmarks/results/score_kinds.md)
    assert control_worse[0], "the control (probabilities read as margins) should be worse"


# slow tier: 47 s on 2 cores; the default tier keeps the exact checks of tests/test_pool_inputs.py
# (a Platt probability gives the margin's strata and prior)
@pytest.mark.slow
@pytest.mark.parametrize("design", ["ais", "poisson-adaptive"])
def test_transform_invariance_synthetic(design):
    d = demo_pool(10_000, positive_rate=0.005, seed=4)
    _check(np.asarray(d.scores[:, 0]), np.asarray(d.preds[:, 0]), np.asarray(d.labels), design, repeats=30,
           budget=600, checkpoints=(300, 600))


@pytest.mark.slow
@pytest.mark.parametrize("pool_name", ["abt-buy", "dblp-acm"])
@pytest.mark.parametrize("design", ["ais", "poisson-adaptive"])
def test_transform_invariance_shared(pool_name, design):
    df = pd.read_parquet(shared_pool_path(pool_name))
    _check(df["score"].to_numpy(float), df["pred"].to_numpy(int), df["label"].to_numpy(int), design, repeats=60,
           budget=2000, checkpoints=(500, 1000, 2000))
