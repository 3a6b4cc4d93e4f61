"""Seed 004 benchmark: error and interval width against the keep rate l, for each measure.

For each pool (the shared abt-buy and dblp-acm pools when ../shared is present, and a
synthetic pool with many positives) and each l in 0.5, 0.1, 0.01, 0.001, the negatives are
thinned R times (positives all kept) and every estimator is compared with the full data's
value: bias, RMSE, mean 95% interval width, coverage (with its binomial SE), for the
weighted (HT/Hájek) F1, precision, recall, AUC (DeLong, data target) and two negative
controls for F1 / precision: the unweighted estimate with the design variance of unthinned
rows (zero width, a weak control) and the naive i.i.d. one (the unweighted estimate with its
plain i.i.d. CLT interval, the thinning ignored).  Also: the η-form bias of the policy value over l = 1 ..
0.001, the AUC planning curve, a reliability diagram.

    taskset -c 1 .venv/bin/python benchmarks/subsampled.py [--reps 500] [--out benchmarks/results]

Writes subsampled.md, subsampled.csv, subsampled_policy_bias.csv, subsampled_auc_plan.png,
subsampled_reliability.png.  F1 / precision / recall are vmapped over sampling masks through
the same core the API calls (:func:`bayes_eval.subsampled.ht_core`).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from bayes_eval import measures as M  # noqa: E402
from bayes_eval import subsampled as S  # noqa: E402
from bayes_eval import subsampled_auc as SA  # noqa: E402
from bayes_eval import subsampled_calibration as SC  # noqa: E402
from bayes_eval import subsampled_policy as SP  # noqa: E402
from bayes_eval.subsampled_cli import plot_plan, plot_reliability  # noqa: E402

SHARED = os.path.join(ROOT, "..", "shared", "data")
LS = (0.5, 0.1, 0.01, 0.001)
Z = 1.959963984540054


def pools():
    out = {}
    for name in ("abt-buy", "dblp-acm"):
        f = os.path.join(SHARED, f"{name}.parquet")
        if os.path.exists(f):
            df = pd.read_parquet(f)
            out[name] = (df.label.to_numpy(), df.score.to_numpy(), df.pred.to_numpy().astype(int))
    rng = np.random.default_rng(0)
    n = 50_000
    y = (rng.random(n) < 0.1).astype(int)
    s = rng.normal(size=n) + 1.5 * y
    out["synthetic (10% pos.)"] = (y, s, (s >= 1.0).astype(int))
    return out


def ht_study(m, y, s, p, masks, b, chunk=50, target="data"):
    feats = M.features_from_arrays(p, s)
    rows = jnp.take_along_axis(m.loss(feats), jnp.asarray(y)[:, None, None], axis=1)[:, 0, :]
    truth = float(M.value(m, feats, y)[0])
    core = jax.jit(jax.vmap(lambda mk, bb: S.ht_core(m.g, rows, bb, mk, target=target), in_axes=(0, None)))
    vals, sds = [], []
    for i in range(0, len(masks), chunk):
        v, var = core(jnp.asarray(masks[i:i + chunk]), jnp.asarray(b))
        vals.append(np.asarray(v)[:, 0])
        sds.append(np.sqrt(np.clip(np.asarray(var)[:, 0], 0, None)))
    return truth, np.concatenate(vals), np.concatenate(sds)


def summarize(pool, l, name, truth, v, sd, rows):
    ok = np.isfinite(v)
    e = v[ok] - truth
    cov = np.mean(np.abs(e) <= Z * sd[ok] + 1e-12)
    rows.append({"pool": pool, "keep_rate": l, "measure": name, "truth": truth, "reps": int(ok.sum()),
                 "undefined": int((~ok).sum()), "bias": e.mean(), "rmse": np.sqrt(np.mean(e * e)),
                 "mean_width": np.mean(2 * Z * sd[ok]), "coverage": cov,
                 "coverage_se": np.sqrt(max(cov * (1 - cov), 0.95 * 0.05) / max(ok.sum(), 1))})


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    rows = []
    for pool, (y, s, p) in pools().items():
        rng = np.random.default_rng(1)
        for l in LS:
            masks = (y[None, :] == 1) | (rng.random((a.reps, len(y))) < l)
            b = np.where(y == 1, 1.0, l)
            for name, m in (("f1", M.f1()), ("precision", M.precision()), ("recall", M.recall())):
                truth, v, sd = ht_study(m, y, s, p, masks, b)
                summarize(pool, l, name, truth, v, sd, rows)
                if name != "recall":
                    truth, v, sd = ht_study(m, y, s, p, masks, np.ones(len(y)))
                    summarize(pool, l, name + " (unweighted)", truth, v, sd, rows)
                    # the naive i.i.d. control: the unweighted estimate with its plain i.i.d.
                    # CLT interval (unit weights, delta method over i.i.d. rows), thinning ignored
                    truth, v, sd = ht_study(m, y, s, p, masks, np.ones(len(y)), target="population")
                    summarize(pool, l, name + " (naive iid)", truth, v, sd, rows)
            truth = SA.auc(y, s).estimate[0]
            v, sd, ok = [], [], []
            for mk in masks:
                e = SA.auc(y[mk], s[mk], keep_rate=l)
                v.append(e.estimate[0])
                sd.append(np.sqrt(e.variance[0]))
                ok.append(e.extra["clt_ok"])
            summarize(pool, l, "auc", truth, np.array(v), np.array(sd), rows)
            rows[-1]["clt_ok_share"] = float(np.mean(ok))
            print(f"{pool} l={l}: {time.time() - t0:.0f}s", flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(os.path.join(a.out, "subsampled.csv"), index=False)

    pb = SP.bias_study([1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001], n_rows=2000, n_reps=20000, seed=0)
    pdf = pd.DataFrame({k: pb[k] for k in ("keep_rate", "bias_eta", "se_bias_eta", "rel_bias_eta",
                                           "rel_bias_predicted", "bias_ht", "se_bias_ht", "rmse_eta", "rmse_ht")})
    pdf.to_csv(os.path.join(a.out, "subsampled_policy_bias.csv"), index=False)

    plans = [SA.plan(n, n_pos_available=None, n_neg_available=None, auc_guess=0.9) for n in (200, 1000, 5000)]
    plot_plan(plans, os.path.join(a.out, "subsampled_auc_plan.png"))

    rng = np.random.default_rng(5)
    n, l = 200_000, 0.05
    x = rng.normal(size=n)
    pt = 1 / (1 + np.exp(-(2 * x - 4)))
    yy = (rng.random(n) < pt).astype(float)
    keep = (yy == 1) | (rng.random(n) < l)
    pp = pt / (pt + l * (1 - pt))  # a model fitted without weights on the thinned data
    est = SC.calibration(pp[keep], yy[keep], keep_rate=l, bins=10)
    plot_reliability(est, os.path.join(a.out, "subsampled_reliability.png"))

    with open(os.path.join(a.out, "subsampled.md"), "w") as f:
        f.write("# Measures from thinned data (seed 004): error and interval width against the keep rate\n\n")
        f.write(f"`taskset -c 1 .venv/bin/python benchmarks/subsampled.py --reps {a.reps}` "
                f"({time.time() - t0:.0f} s).  Negatives kept with probability l, positives all kept; "
                f"{a.reps} thinnings per row; truth = the full data's value; 95% CLT intervals "
                "(`target=\"data\"`); coverage SE = binomial.  Negative controls: `(unweighted)` = the "
                "unweighted estimate with the design variance of unthinned rows (zero width: a weak control); "
                "`(naive iid)` = the unweighted estimate with its plain i.i.d. CLT interval, the thinning "
                "ignored (the control that must fail).\n\n")
        cols = ["pool", "keep_rate", "measure", "truth", "reps", "bias", "rmse", "mean_width", "coverage",
                "coverage_se"]
        f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        for _, r in df.iterrows():
            f.write("| " + " | ".join(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |\n")
        f.write("\n## Policy value: bias of the η form (004 §Policy Value Estimation)\n\n")
        f.write("Synthetic contextual-bandit log (`subsampled_policy.simulate_log`), N = 2000 rows, 20,000 logs, "
                f"true value {pb['value']:.5f}; predicted = q₀(1 − l)/(l N).\n\n")
        f.write("| " + " | ".join(pdf.columns) + " |\n|" + "---|" * len(pdf.columns) + "\n")
        for _, r in pdf.iterrows():
            f.write("| " + " | ".join(f"{r[c]:.4g}" for c in pdf.columns) + " |\n")
    print(f"done in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
