"""The report's NUTS posterior against the fast sampler, over repeats (issue 15).

``bayes_eval.report`` fits the finite-pool posterior by NUTS (NumPyro, the report's default:
4 chains of 500 + 1000) or by the fast sampler the simulations and the session use (Laplace-t
importance resampling over the calibrated model's band-scale grid). Both sample the same
posterior of the calibrated model (``models/calibrated.py``; 001 §4 for the finite-pool
completion). This study checks that claim where it matters to the analyst -- the interval --
on the labels of captured runs: each run's highest-density interval of F1 by both methods,
their coverage over runs and their width, the NUTS diagnostics (R-hat of F1, divergences),
and the simulation's own interval (the fast sampler at 200 draws) on the same labels.

    python benchmarks/interval_study/capture_labels.py POOL --design ais --repeats 100 --out CAP.npz
    python benchmarks/interval_study/nuts_vs_fast.py POOL CAP.npz --runs 50 --out OUT.json

The table: ``python benchmarks/interval_study/nuts_vs_fast.py --table OUT.json [OUT2.json ...]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval.models.posterior_samplers import CalibratedSampler  # noqa: E402
from bayes_eval.report import fit_finite_pool, summary_table  # noqa: E402
from capture_labels import load_capture  # noqa: E402  (beside this file)


def fit_both(cells, labeled, k, truth, seed, chains, warmup, samples, sampler):
    """One run's labels at one checkpoint: the HDI of F1 by NUTS and by the fast sampler."""
    out = {}
    for method in ("nuts", "fast"):
        t0 = time.perf_counter()
        fit = fit_finite_pool(cells, labeled, k, "f1", method=method, num_chains=chains, num_warmup=warmup,
                              num_samples=samples, seed=seed, sampler=sampler if method == "nuts" else None)
        row = summary_table(fit, truth=[truth]).iloc[0]
        rec = {"lower": float(row["hdi_lower"]), "upper": float(row["hdi_upper"]), "mean": float(row["post_mean"]),
               "covers": bool(row["hdi_covers"]), "r_hat": float(row["r_hat"]), "ess_bulk": float(row["ess_bulk"]),
               "seconds": round(time.perf_counter() - t0, 3)}
        if method == "nuts":
            rec["divergences"] = int(np.asarray(fit.sample_stats["diverging"]).sum())
        out[method] = rec
    return out


def run(pool_path, capture, runs, chains, warmup, samples, out_path, at=None):
    cap = load_capture(pool_path, capture)
    d, cells, truth = cap.data, cap.cells, cap.truth
    sampler = CalibratedSampler()
    recs = []
    t0 = time.perf_counter()
    for i in range(min(runs, d["labeled"].shape[0])):
        for c, ck in enumerate(d["checkpoints"]):
            if at and int(ck) not in at:
                continue
            r = fit_both(cells, d["labeled"][i, c], cap.n_strata, truth, 1000 * i + c, chains, warmup, samples,
                         sampler)
            r.update(run=i, labels=int(ck), truth=truth, estimate=float(d["value"][i, c, 0]),
                     sim={"lower": float(d["bayes_lower"][i, c, 0]), "upper": float(d["bayes_upper"][i, c, 0])})
            recs.append(r)
        print(f"run {i}: {time.perf_counter() - t0:.0f} s", flush=True)
        with open(out_path, "w") as f:   # rewritten after every run: an interrupted study keeps its runs
            json.dump({"pool": os.path.basename(pool_path), "capture": os.path.basename(capture), "chains": chains,
                       "warmup": warmup, "samples": samples, "records": recs}, f)


def table(paths):
    print("| pool | labels | runs | NUTS coverage | fast coverage | simulation's coverage (200 draws) "
          "| NUTS width | fast width ÷ NUTS | mean \\|Δ lower\\| / \\|Δ upper\\| ÷ NUTS width "
          "| NUTS max R-hat | runs with divergences | NUTS s / fast s per fit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        d = json.load(open(p))
        recs = d["records"]
        for lab in sorted({r["labels"] for r in recs}):
            rs = [r for r in recs if r["labels"] == lab]
            n = len(rs)
            nu = np.array([[r["nuts"]["lower"], r["nuts"]["upper"]] for r in rs])
            fa = np.array([[r["fast"]["lower"], r["fast"]["upper"]] for r in rs])
            si = np.array([[r["sim"]["lower"], r["sim"]["upper"]] for r in rs])
            t = np.array([r["truth"] for r in rs])
            cov = lambda a: np.mean((a[:, 0] <= t + 1e-12) & (t <= a[:, 1] + 1e-12))  # noqa: E731
            wn, wf = nu[:, 1] - nu[:, 0], fa[:, 1] - fa[:, 0]
            dl = np.mean(np.abs(fa[:, 0] - nu[:, 0]) / np.maximum(wn, 1e-12))
            du = np.mean(np.abs(fa[:, 1] - nu[:, 1]) / np.maximum(wn, 1e-12))
            rh = np.nanmax([r["nuts"]["r_hat"] for r in rs])
            dv = np.mean([r["nuts"]["divergences"] > 0 for r in rs])
            sn = np.mean([r["nuts"]["seconds"] for r in rs])
            sf = np.mean([r["fast"]["seconds"] for r in rs])
            print(f"| {d['pool']} | {lab} | {n} | {cov(nu):.2f} | {cov(fa):.2f} | {cov(si):.2f} | {wn.mean():.3f} "
                  f"| {np.mean(wf) / np.mean(wn):.3f} | {dl:.3f} / {du:.3f} | {rh:.3f} | {dv:.2f} | {sn:.1f} / {sf:.1f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool", nargs="?")
    ap.add_argument("capture", nargs="?")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--at", default="", help="the checkpoints (labels) to fit, comma-separated; default all")
    ap.add_argument("--out")
    ap.add_argument("--table", nargs="+")
    a = ap.parse_args()
    if a.table:
        table(a.table)
        return
    if not (a.pool and a.capture and a.out):
        ap.error("POOL, CAPTURE and --out are needed (or --table JSON...)")
    at = {int(x) for x in a.at.split(",") if x}
    run(a.pool, a.capture, a.runs, a.chains, a.warmup, a.samples, a.out, at)


if __name__ == "__main__":
    main()
