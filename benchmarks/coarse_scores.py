"""Stop 81: AIS's oracle model on scores of few values (``--model auto``, ``designs.resolve_oracle_model``).

    python benchmarks/coarse_scores.py [--repeats 100] [--pools hard,three,lev4,...] [--out FILE.md]

Generated pools of 20,000 items (the constructions of README, "The main method"): a score that is
the prediction itself (``hard``: 5% positive; the classifier finds 70% of the positives and flags 2%
of the negatives); the prediction plus confidence levels of the predicted negatives (``three``,
``lev4``, ``lev6``, ``lev10``); logistic scores rounded to 5, 8 or 11 values (``round4``, ``r8_5``,
``round1``); with ``--shared``, abt-buy and dblp-acm at 2000 labels.  For each: AIS with the
Dirichlet tree, AIS with a Beta per stratum (``independent``), ``auto`` (the model it resolves to)
and passive sampling, ``--repeats`` runs of 1000 labels (checkpoints 500 and 1000), the MSE of F1
and the CLT interval's coverage.  Each pool takes ~1-2 min on two cores; the table is written to
``benchmarks/results/coarse_scores.md`` (or ``--out``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bayes_eval import measures as M  # noqa: E402
from bayes_eval.cells import build_cells  # noqa: E402
from bayes_eval.designs import resolve_oracle_model  # noqa: E402
from bayes_eval.pool import Pool  # noqa: E402
from bayes_eval.results import summarize  # noqa: E402
from bayes_eval.simulate import run_simulation  # noqa: E402
from bayes_eval.strata import stratify  # noqa: E402

N = 20_000


def _hard_parts(seed):
    rng = np.random.default_rng(seed)
    y = rng.random(N) < 0.05
    pred = np.where(y, rng.random(N) < 0.7, rng.random(N) < 0.02).astype(int)
    return rng, y, pred


def hard():
    _, y, pred = _hard_parts(7)
    return pred.astype(float), pred, y


def three():
    rng, y, pred = _hard_parts(7)
    sig = np.where(y, rng.random(N) < 0.6, rng.random(N) < 0.3)
    return np.where(pred == 1, 0.9, np.where(sig, 0.3, 0.05)), pred, y


def levels(n_levels):
    def make():
        rng, y, pred = _hard_parts(9)
        for L in (4, 6, 10):     # one generator for the three pools, as measured: draw them in order
            sig = np.where(y, rng.beta(2, 1.5, N), rng.beta(1.5, 2, N))
            lev = np.minimum((sig * (L - 1)).astype(int), L - 2)
            if L == n_levels:
                return np.where(pred == 1, 0.9, 0.05 + 0.4 * lev / max(L - 2, 1)), pred, y
    return make


def rounded(values, rate, seed, loc0):
    def make():
        rng = np.random.default_rng(seed)
        y = rng.random(N) < rate
        s = np.where(y, rng.normal(0.8, 1.2, N), rng.normal(loc0, 1.0 if loc0 == -2.5 else 1.2, N))
        p = 1 / (1 + np.exp(-s))
        return np.round(p * (values - 1)) / (values - 1), (p >= 0.5).astype(int), y
    return make


POOLS = {"hard": hard, "three": three, "lev4": levels(4), "lev6": levels(6), "lev10": levels(10),
         "round4": rounded(5, 0.05, 11, -2.5), "r8_5": rounded(8, 0.05, 13, -1.5), "round1": rounded(11, 0.05, 11, -2.5)}


def row(pool, design, model, budget, repeats, checkpoints):
    res, _ = run_simulation(pool, M.f1(), design, budget=budget, batch=50, repeats=repeats, seed=0,
                            checkpoints=checkpoints, model=model)
    return [(r["mse"], r["coverage"]) for r in summarize(res)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--pools", default=",".join(POOLS))
    ap.add_argument("--shared", action="store_true", help="abt-buy and dblp-acm too (../shared/data)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "coarse_scores.md"))
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    todo = [(n, POOLS[n], 1000, (500, 1000)) for n in a.pools.split(",") if n]
    if a.shared:
        here = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data")
        todo += [(n, n, 2000, (1000, 2000)) for n in ("abt-buy", "dblp-acm")]
    lines = [f"# AIS's oracle model on coarse scores (stop 81; {a.repeats} runs per cell)", "",
             "`python benchmarks/coarse_scores.py` -- MSE of F1 / CLT coverage at each checkpoint.", "",
             "| pool | values | auto | checkpoint | tree | Beta per stratum | passive |", "|---|---|---|---|---|---|---|"]
    for name, make, budget, ck in todo:
        t0 = time.time()
        if isinstance(make, str):
            pool = Pool.from_file(os.path.join(here, f"{make}.parquet"))
        else:
            s, pred, y = make()
            pool = Pool.from_arrays(scores=s, preds=pred, labels=y.astype(int), name=name)
        cells, _ = build_cells(pool, stratify(pool, 256), M.f1())
        auto = resolve_oracle_model("auto", cells, 256)
        values = len(np.unique(np.asarray(pool.scores)[:, 0]))
        tree = row(pool, "ais", "dirichlet-tree", budget, a.repeats, ck)
        ind = row(pool, "ais", "independent", budget, a.repeats, ck)
        pas = row(pool, "passive", "auto", budget, a.repeats, ck)
        for k, c in enumerate(ck):
            lines.append(f"| {name} | {values} | {auto} | {c} | {tree[k][0]:.2e} / {tree[k][1]:.2f} | "
                         f"{ind[k][0]:.2e} / {ind[k][1]:.2f} | {pas[k][0]:.2e} / {pas[k][1]:.2f} |")
        print("\n".join(lines[-len(ck):]), f"({time.time() - t0:.0f} s)", flush=True)
    with open(a.out, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
