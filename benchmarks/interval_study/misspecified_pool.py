"""Pools whose positive rate is not a logistic curve of the score, with many positives: where the
CLT check passes and a session now reads the Bayesian interval first (issue 15, item 4).

    python benchmarks/interval_study/misspecified_pool.py /tmp/istudy
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
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/istudy")
