"""Does the estimate depend on how the scores are written?  (issue 14)

    python benchmarks/score_kinds.py [--repeats 100] [--pools abt-buy,dblp-acm,demo]
                                     [--designs ais,poisson-adaptive] [--out benchmarks/results]

The same pool, with the same predictions and labels, is given to the package with its
scores replaced by strictly increasing transforms of them -- the SVM margin itself, the
probability ``sigmoid(margin)``, its logit, and the rank 1..N (each read with the default
score-kind detection) -- and, as a control, the probability forced to be read as a margin
(what every release before score kinds did).  For each design, the F1 MSE at 500 / 1000 /
2000 labels (40 stages × 50, deterministic oracle, seed 0 for every transform) with a
bootstrap 95% interval, and the MSE ratio to the margin run.

Writes ``score_kinds.md`` / ``.csv`` under ``--out``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.pool import Pool, demo_pool, sigmoid  # noqa: E402
from bayes_eval.simulate import run_simulation  # noqa: E402
from stats import bootstrap_ci  # noqa: E402  (benchmarks/stats.py)

CHECKPOINTS = (500, 1000, 2000)


def base_arrays(name, data):
    if name == "demo":
        p = demo_pool()
        return np.asarray(p.scores[:, 0]), np.asarray(p.preds[:, 0]), np.asarray(p.labels)
    df = pd.read_parquet(os.path.join(data, f"{name}.parquet"))
    return df["score"].to_numpy(float), df["pred"].to_numpy(int), df["label"].to_numpy(int)


def transforms(s):
    """name -> (scores, score_kind passed to the pool)."""
    p = sigmoid(s)
    ranks = np.empty(s.size)
    ranks[np.argsort(s, kind="stable")] = np.arange(1, s.size + 1)  # ties broken by row: strictly increasing
    return {
        "margin": (s, None),
        "probability": (p, None),
        "logit": (np.log(p) - np.log1p(-p), "logit"),
        "rank": (ranks, None),
        "probability read as margin (old)": (p, "margin"),
    }


def mse_row(res, i):
    v = res.checkpoint_value[:, i, 0]
    t = float(res.true_value[0])
    err2 = (v - t) ** 2
    ok = np.isfinite(err2)
    m = float(np.mean(err2[ok]))
    lo, hi = bootstrap_ci(err2[ok])
    return m, lo, hi


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--pools", default="abt-buy,dblp-acm,demo")
    ap.add_argument("--designs", default="ais,poisson-adaptive")
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows = []
    for name in args.pools.split(","):
        s, pred, y = base_arrays(name, args.data)
        for design in args.designs.split(","):
            base = None
            for tname, (sc, kind) in transforms(s).items():
                pool = Pool.from_arrays(scores=sc, preds=pred, labels=y, name=name, score_kind=kind)
                t0 = time.perf_counter()
                res, _ = run_simulation(pool, M.f1(), design, budget=2000, batch=50, repeats=args.repeats,
                                        seed=args.seed, checkpoints=CHECKPOINTS, bayes=False, track_kl=False)
                secs = time.perf_counter() - t0
                mses = [mse_row(res, i) for i in range(len(CHECKPOINTS))]
                if base is None:
                    base = [m for m, _, _ in mses]
                row = {"pool": name, "design": design, "scores": tname, "kind": pool.score_kind,
                       "strata": None, "seconds": round(secs, 1)}
                for c, (m, lo, hi), b in zip(CHECKPOINTS, mses, base):
                    row[f"mse@{c}"] = m
                    row[f"ci@{c}"] = f"[{lo:.2e}, {hi:.2e}]"
                    row[f"ratio@{c}"] = m / b if b > 0 else np.nan
                rows.append(row)
                print(f"{name:9s} {design:17s} {tname:34s} " + "  ".join(
                    f"{row[f'mse@{c}']:.2e} ({row[f'ratio@{c}']:.2f}x)" for c in CHECKPOINTS), flush=True)
    df = pd.DataFrame(rows).drop(columns=["strata"])
    os.makedirs(args.out, exist_ok=True)
    df.to_csv(os.path.join(args.out, "score_kinds.csv"), index=False)
    with open(os.path.join(args.out, "score_kinds.md"), "w") as f:
        f.write(f"# F1 MSE by how the scores are written ({args.repeats} repeats, seed {args.seed})\n\n")
        f.write("`python benchmarks/score_kinds.py --repeats %d`; ratio = MSE ÷ the margin run's MSE.\n\n" % args.repeats)
        cols = ["pool", "design", "scores", "kind"] + [k for c in CHECKPOINTS for k in (f"mse@{c}", f"ratio@{c}")]
        f.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        for _, r in df.iterrows():
            cells = [str(r[c]) if not isinstance(r[c], float) else (f"{r[c]:.2e}" if c.startswith("mse") else f"{r[c]:.2f}")
                     for c in cols]
            f.write("| " + " | ".join(cells) + " |\n")
    return df


if __name__ == "__main__":
    main()
