"""The CLT interval on the logit scale (measured at stop 73, not adopted): expit(logit Ĝ ± z sd /
(Ĝ (1 − Ĝ))) against the library's Ĝ ± z sd, both then cut to what the labels allow
(``feasible.cut``), and the same for the confidence sequence (z → ``cs_factor(n)``), from one
simulation's per-run estimate and sd (``SimResult.checkpoint_sd``).  F1 by default; budget 2000
in stages of 50, checkpoints 250 / 500 / 1000 / 2000; seed 7.  Prints coverage and mean width ÷
the estimate's RMSE per checkpoint::

    python benchmarks/interval_study/make_pools.py /tmp/istudy
    python benchmarks/interval_study/logit_interval.py /tmp/istudy/p0.1.parquet stratified 2000
    python benchmarks/interval_study/logit_interval.py dblp-acm ais 500

The reading is in ``docs/intervals.md`` ("The CLT check", stratified sampling's CLT).
"""
import os
import sys
import time

import numpy as np

from bayes_eval.estimators import cs_factor
from bayes_eval.feasible import cut
from bayes_eval.registry import load_pool, measure_from_args
from bayes_eval.simulate import run_simulation

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")
Z = 1.959963984540054
CHECKPOINTS = (250, 500, 1000, 2000)


def expit(x):
    return 1.0 / (1.0 + np.exp(-x))


def logit_interval(v, sd, k):
    """expit(logit v ± k sd / (v (1 − v))); the plain v ± k sd where v is 0 or 1."""
    inner = (v > 0) & (v < 1)
    vv = np.clip(v, 1e-12, 1 - 1e-12)
    lg, sl = np.log(vv / (1 - vv)), sd / (vv * (1 - vv))
    return (np.where(inner, expit(lg - k * sl), np.clip(v - k * sd, 0, 1)),
            np.where(inner, expit(lg + k * sl), np.clip(v + k * sd, 0, 1)))


def main():
    pname, design, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    meas = sys.argv[4] if len(sys.argv) > 4 else "f1"
    path = pname if os.path.exists(pname) else os.path.join(SHARED, f"{pname}.parquet")
    pool = load_pool(path)
    t = time.time()
    res, _ = run_simulation(pool, measure_from_args(meas, pool), design, budget=2000, batch=50, repeats=reps, seed=7,
                            checkpoints=CHECKPOINTS, bayes=False, track_kl=False)
    tv = float(np.ravel(res.true_value)[0])
    print(f"{pname} {design} {meas}: truth {tv:.4f}, {reps} runs ({time.time() - t:.0f} s)")
    draws_design = res.design not in ("poisson", "poisson-adaptive")
    for j, c in enumerate(CHECKPOINTS):
        v, sd = res.checkpoint_value[:, j, 0], res.checkpoint_sd[:, j, 0]
        n = (res.checkpoint_draws if draws_design else res.checkpoint_labels)[:, j]
        fe = res.checkpoint_feasible[:, j, :, :1] if res.checkpoint_feasible is not None else None
        ok = np.isfinite(v) & np.isfinite(sd)
        rmse = np.sqrt(np.mean((v[ok] - tv) ** 2))
        k = np.asarray(cs_factor(np.asarray(n, float)))
        out = []
        for name, (lo, hi) in [("clt", (v - Z * sd, v + Z * sd)), ("clt-logit", logit_interval(v, sd, Z)),
                               ("cs", (v - k * sd, v + k * sd)), ("cs-logit", logit_interval(v, sd, k))]:
            lo, hi = np.clip(lo, 0, 1), np.clip(hi, 0, 1)
            if fe is not None:
                lo, hi = (a[:, 0] for a in cut(lo[:, None], hi[:, None], fe))
            lo, hi = lo[ok], hi[ok]
            out.append(f"{name} {np.mean((lo <= tv) & (tv <= hi)):.3f} ({np.mean(hi - lo) / rmse:.1f}x)")
        print(f"  {c:5d} labels, {ok.sum()} runs defined, RMSE {rmse:.4f}: " + "  ".join(out))


if __name__ == "__main__":
    main()
