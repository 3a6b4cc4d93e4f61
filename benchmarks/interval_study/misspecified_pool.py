"""Pools whose positive rate is not a logistic curve of the score, with many positives: where the
CLT check passes and a session now reads the Bayesian interval first (issue 15, item 4).

    python benchmarks/interval_study/misspecified_pool.py /tmp/istudy
    python benchmarks/interval_study/misspecified_pool.py --fit /tmp/istudy/plateau.parquet /tmp/istudy/staircase10.parquet
    bayes-eval simulate /tmp/istudy/plateau.parquet --design D --repeats 200 --seed 0 --bayes yes \\
        --checkpoints 500,1000,2000 --format json > benchmarks/results/misspecified/plateau_D.json

The calibrated model behind the Bayesian interval (``models/calibrated.py``) puts each cell's
positive rate near sigmoid(a + b logit s): a curve in the score, with per-cell departures (κ).
The synthetic pools of the record draw their labels from such a curve.  Until stop 50 a session
led with the confidence sequence wherever the CLT check passed, which needs no model; leading with
the Bayesian interval there bets on the model, so these pools test that bet where the curve is
wrong and the check passes:

* ``plateau``: 30,000 items, scores N(0, 1.5); the positive rate is 0.03 below -1, a plateau of
  0.45 over [-1, 1.5) -- straddling the classifier's threshold 0 -- and 0.92 above: a staircase,
  no logistic curve (42% positive, F1 0.647);
* ``dip``: 30,000 items, scores N(0, 1.5); a logistic rate sigmoid(1.5 s) except for a dip to
  0.1 over [0.5, 1.5), just above the threshold (non-monotone; 35% positive, F1 0.591);
* ``staircase10``: 50,000 items, scores N(0, 1.5); rate 0.002 below -1, 0.02 on [-1, 1.5), 0.5
  above, the classifier's threshold at 1 (9.3% positive, F1 0.474).
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pandas as pd


def pools(seed=11):
    rng = np.random.default_rng(seed)
    n = 30000
    s = rng.normal(0.0, 1.5, n)
    rate = np.where(s < -1.0, 0.03, np.where(s < 1.5, 0.45, 0.92))
    y = (rng.random(n) < rate).astype(np.int8)
    yield "plateau", pd.DataFrame({"score": s, "pred": (s >= 0).astype(np.int8), "label": y})
    s = rng.normal(0.0, 1.5, n)
    rate = np.where((s >= 0.5) & (s < 1.5), 0.1, 1 / (1 + np.exp(-1.5 * s)))
    y = (rng.random(n) < rate).astype(np.int8)
    yield "dip", pd.DataFrame({"score": s, "pred": (s >= 0).astype(np.int8), "label": y})
    rng = np.random.default_rng(12)
    n = 50000
    s = rng.normal(0.0, 1.5, n)
    rate = np.where(s < -1.0, 0.002, np.where(s < 1.5, 0.02, 0.5))
    y = (rng.random(n) < rate).astype(np.int8)
    yield "staircase10", pd.DataFrame({"score": s, "pred": (s >= 1.0).astype(np.int8), "label": y})


def fitted_curve(path, labels=1000, seed=0):
    """One AIS session of ``labels`` labels on the pool at ``path`` (its truth the oracle): the
    calibrated model's fitted (a, b, κ) on those labels, its curve against the pool's rate in
    three score bands, and the intervals the session reports (``--fit``)."""
    import tempfile

    import jax.numpy as jnp

    import bayes_eval as be
    from bayes_eval.cells import leaf_counts, posterior_units

    pool = be.Pool.from_file(path)
    with tempfile.TemporaryDirectory() as d:
        s = be.Session.create(os.path.join(d, "s.db"), pool, "f1", "ais", seed=seed)
        s.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=labels, batch=50)
        core, model = s._core, s.posterior_model()
        units = core.jitted.get(("posterior_units", "calibrated")) or posterior_units(core.cells, core.n_strata,
                                                                                        "stratum")
        cnt, unl = leaf_counts(units.cells, jnp.asarray(s._labeled), units.n_units)
        a, b, log_kappa = np.asarray(model.fit(model.init_state(), cnt, unl).mode)
        e = s.status(bayesian=True)["estimates"][0]
        s.close()
    score, y = np.asarray(pool.scores)[:, 0], np.asarray(pool.labels)
    print(f"{os.path.basename(path)}: {labels} AIS labels, fitted a = {a:.2f}, b = {b:.2f}, kappa = "
          f"{np.exp(log_kappa):.1f}; truth {pool.true_value(be.measures.f1())[0]:.4f}, estimate "
          f"{e['estimate']:.4f}, Bayesian [{e['bayes_lower']:.4f}, {e['bayes_upper']:.4f}] (median "
          f"{e['bayes_median']:.4f}), confidence sequence [{e['cs_lower']:.4f}, {e['cs_upper']:.4f}]")
    for lo, hi in ((-np.inf, -1.0), (-1.0, 1.5), (1.5, np.inf)):
        band = (score >= lo) & (score < hi)
        curve = float(np.mean(1 / (1 + np.exp(-(a + b * score[band])))))   # SVM margins: z = score
        print(f"  scores in [{lo:g}, {hi:g}): {int(band.sum()):,} items, rate {y[band].mean():.3f}, "
              f"fitted curve {curve:.3f}")


def main(out):
    os.makedirs(out, exist_ok=True)
    for name, df in pools():
        df.index.name = "item"
        path = os.path.join(out, f"{name}.parquet")
        df.to_parquet(path)
        p, y = df["pred"].to_numpy(), df["label"].to_numpy()
        tp = int(((p == 1) & (y == 1)).sum())
        print(f"{path}: {len(df):,} items, {int(y.sum()):,} positive ({y.mean():.1%}), "
              f"F1 {2 * tp / (int(p.sum()) + int(y.sum())):.4f}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--fit":     # misspecified_pool.py --fit POOL.parquet [...]
        for path in sys.argv[2:]:
            fitted_curve(path)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/istudy")
