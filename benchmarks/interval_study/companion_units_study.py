"""The AIS design's calibrated companion fitted per *cell* instead of per stratum, measured.

The companion (``bayes_eval.ais.ais_design(companion="calibrated")``) feeds three things: half
of every early stage's proposal (the mixture of ``designs.sweep_share``), the model-assisted
variance and the CLT check (``Design.shares``).  Since stop 30 the finite-pool posterior is
fitted per cell (``cells.posterior_units``: a stratum's predicted positives and predicted
negatives apart), because a per-stratum rate spreads a straddling stratum's labeled predicted
positives' rate over its unlabeled predicted negatives (``benchmarks/results/interval_units.md``).
The companion kept the per-stratum fit.  This script runs the same seeds with
``companion_units="stratum"`` (the default) and ``"cell"`` and writes one JSON per
(pool, units) -- the ``simulate`` JSON's checkpoint entries: MSE, CLT coverage, the check's pass
rate and the coverage of the runs that pass it -- then the table
``benchmarks/results/companion_units.md``::

    python benchmarks/interval_study/make_pools.py /tmp/istudy
    taskset -c 1 python benchmarks/interval_study/companion_units_study.py \\
        --pools dblp-acm,abt-buy,/tmp/istudy/demo.parquet --repeats 100
    python benchmarks/interval_study/companion_units_study.py --table

Each (pool, units) is written as it ends; an existing file is kept unless ``--force``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from audit_study import fmt, kept, pool_name, pool_path, save_json, write_table  # noqa: E402

OUT = os.path.join(ROOT, "benchmarks", "results", "companion_units")
TABLE = os.path.join(ROOT, "benchmarks", "results", "companion_units.md")


VARIANTS = {"stratum": dict(companion_units="stratum", check_units="stratum"),
            "cell": dict(companion_units="cell", check_units="cell"),
            "check-cell": dict(companion_units="stratum", check_units="cell")}


def run_one(pool, units, repeats, seed, force):
    tag = "" if seed == 0 else f"_seed{seed}"
    out = os.path.join(OUT, f"{pool_name(pool)}_{units}{tag}.json")
    if kept(out, force):
        return
    from bayes_eval.registry import load_pool, measure_from_args
    from bayes_eval.results import summarize
    from bayes_eval.simulate import run_simulation

    p = load_pool(pool_path(pool))
    t0 = time.time()
    res, _ = run_simulation(p, measure_from_args("f1", p), "ais", budget=2000, batch=50, repeats=repeats, seed=seed,
                            checkpoints=(500, 1000, 2000), bayes=False, track_kl=False, **VARIANTS[units])
    ck = summarize(res)
    err2 = (np.asarray(res.checkpoint_value)[:, :, 0] - float(res.true_value[0])) ** 2  # (runs, checkpoints)
    for i, c in enumerate(ck):  # the Monte Carlo standard error of each MSE
        e = err2[np.isfinite(err2[:, i]), i]
        c["mse_se"] = float(e.std(ddof=1) / np.sqrt(e.size)) if e.size > 1 else None
    d = {"pool": pool_name(pool), "units": units, "repeats": repeats, "seed": seed,
         "true_value": float(res.true_value[0]), "seconds": time.time() - t0, "checkpoints": ck}
    save_json(out, d, d["seconds"], indent=1)


def mse_cell(c):
    """MSE ×10⁴, ± its Monte Carlo standard error where the run saved it."""
    if c.get("mse") is None:
        return None
    return f"{c['mse'] * 1e4:.2f}" + (f" ± {c['mse_se'] * 1e4:.2f}" if c.get("mse_se") is not None else "")


def table():
    runs = {}
    for path in sorted(glob.glob(os.path.join(OUT, "*.json"))):
        with open(path) as f:
            d = json.load(f)
        runs[(d["pool"], d["units"], d["seed"])] = d
    rows = ["| pool | companion units | runs, seed | MSE ×10⁴ @500/1000/2000 | CLT coverage | check passed | "
            "coverage where it passed |", "|---|---|---|---|---|---|---|"]
    for (pool, units, seed), d in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1] != "stratum")):
        ck = d["checkpoints"]
        rows.append(f"| {pool} | {units} | {d['repeats']}, {seed} | "
                    f"{fmt([mse_cell(c) for c in ck], '{}')} | "
                    f"{fmt([c.get('coverage') for c in ck], '{:.2f}')} | "
                    f"{fmt([c.get('clt_check_passed') for c in ck], '{:.2f}')} | "
                    f"{fmt([c.get('coverage_checked') for c in ck], '{:.2f}')} |")
    write_table(TABLE, ["# The AIS companion per stratum and per cell (F1, 2000 labels, batch 50)", "",
                        "Command: `benchmarks/interval_study/companion_units_study.py` (the same seeds for both "
                        "units).", ""] + rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pools", default="dblp-acm,abt-buy")
    ap.add_argument("--units", default="stratum,cell")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--table", action="store_true", help="only build the table from the saved runs")
    a = ap.parse_args()
    if not a.table:
        for pool in a.pools.split(","):
            for units in a.units.split(","):
                run_one(pool, units, a.repeats, a.seed, a.force)
    table()


if __name__ == "__main__":
    main()
