"""Coverage of the report's PR-curve bands over repeated sessions (stop 36).

    taskset -c 0 python benchmarks/interval_study/pr_band_coverage.py POOL [--design ais] \\
        [--repeats 40] [--labels 500,1000] [--thresholds 16] [--out FILE.json]

Each repeat is a session (``Session.run`` with the pool's labels as the oracle, seed = the
repeat's index, batches of 50) on the pool; at each budget in ``--labels`` it takes what
``session report --pr-curve`` draws: the CLT band of the design's estimate
(``Session.estimate_draws``; IS designs) and the Bayesian band (``Session.posterior_of``), on
``--thresholds`` evenly spaced scores, and checks them against the pool's true curve.

Printed per budget: the pointwise coverage of precision and recall (share of (run, threshold)
pairs whose band holds the truth, over the thresholds where both are defined), the share of
runs whose band holds the whole curve, and the mean band width.  ``POOL``: a shared pool's name
(``abt-buy``, ``dblp-acm``), ``demo`` or a file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.estimators import normal_interval  # noqa: E402
from bayes_eval.posterior import equal_tailed  # noqa: E402
from bayes_eval.registry import load_pool  # noqa: E402
from bayes_eval.session import Session  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("--design", default="ais")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--labels", default="500,1000")
    ap.add_argument("--thresholds", type=int, default=16)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    budgets = sorted(int(b) for b in a.labels.split(","))
    pool = load_pool(a.pool)
    t = M.default_thresholds(np.asarray(pool.scores[:, 0]), a.thresholds, spacing="uniform")
    pr = M.pr_curve(t)
    truth = np.asarray(pool.true_value(pr))
    L = len(t)

    def oracle(b):
        return pool.labels[pool.index_of(b["item"].to_numpy())]

    rec = {b: {"bayes": [], "clt": []} for b in budgets}
    t0 = time.time()
    for r in range(a.repeats):
        s = Session.create(":memory:", pool, "f1", a.design, seed=r)
        for b in budgets:
            s.run(oracle, budget=b, batch=50)
            lo, hi = (np.asarray(x) for x in equal_tailed(s.posterior_of(pr), 0.95))
            rec[b]["bayes"].append((lo, hi))
            try:
                est = s.estimate_draws(pr)
                clo, chi = (np.clip(np.asarray(x), 0, 1) for x in normal_interval(est.value, est.cov, 0.95))
            except Exception:  # a Poisson design: no estimate of a further measure
                clo = chi = np.full(2 * L, np.nan)
            rec[b]["clt"].append((clo, chi))
        s.close()
        print(f"run {r + 1}/{a.repeats} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)

    out = {"pool": a.pool, "design": a.design, "repeats": a.repeats, "thresholds": t.tolist(), "budgets": {}}
    print(f"{a.pool}, {a.design}, {a.repeats} sessions, {L} thresholds (pointwise coverage; whole-curve share; "
          f"mean width)")
    for b in budgets:
        row = {}
        for kind in ("bayes", "clt"):
            lo = np.stack([x[0] for x in rec[b][kind]])
            hi = np.stack([x[1] for x in rec[b][kind]])
            ok = np.isfinite(truth)[None, :] & np.isfinite(lo) & np.isfinite(hi)
            held = (lo - 1e-12 <= truth) & (truth <= hi + 1e-12)
            part = {}
            for q, sl in (("precision", slice(0, L)), ("recall", slice(L, 2 * L))):
                o, h = ok[:, sl], held[:, sl]
                part[q] = {"pointwise": float(h[o].mean()) if o.any() else None,
                           "whole_curve": float(np.mean([h[i][o[i]].all() for i in range(len(h)) if o[i].any()]))
                           if o.any() else None,
                           "mean_width": float(np.mean((hi - lo)[:, sl][o])) if o.any() else None}
            row[kind] = part
        out["budgets"][b] = row

        def fmt(p):
            return "–" if p["pointwise"] is None else f"{p['pointwise']:.3f}; {p['whole_curve']:.2f}; {p['mean_width']:.3f}"

        print(f"  {b} labels: Bayesian precision {fmt(row['bayes']['precision'])} | recall "
              f"{fmt(row['bayes']['recall'])} || CLT precision {fmt(row['clt']['precision'])} | recall "
              f"{fmt(row['clt']['recall'])}")
    out["seconds"] = time.time() - t0
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
