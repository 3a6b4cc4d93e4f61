"""Stopping honestly (issue 15 item 3): a scripted loop looks at the interval after every
stage and stops once it is at most W wide.  For each pool and design, one simulation
(every stage's estimate and CLT interval recorded), then the stopping rule of
``bayes_eval.results.stopping`` for the fixed-n CLT interval and for the confidence
sequence (``estimators.confidence_sequence``), at W = 0.05 and 0.02; and the fixed-budget
coverage of both at the checkpoints.

    python benchmarks/stopping.py [--repeats 200] [--pools abt-buy,dblp-acm,demo]
        [--designs ais,poisson-adaptive] [--out benchmarks/results/stopping]
    python benchmarks/stopping.py --bayes --repeats 100 --pools dblp-acm,abt-buy --designs ais \
        --out benchmarks/results/stopping_bayes [--budget 2000]

``--bayes``: the rule on the Bayesian finite-pool interval instead (the calibrated model's
posterior after every stage: ``run_simulation(bayes_stages=True)``, one posterior per stage
and run -- ~40x the cost of the checkpoint intervals).

Writes OUT.csv and OUT.md.  Pin it to one core (``taskset -c 1``) and run it alone for
timings; coverage does not depend on the load.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "shared", "data")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--pools", default="abt-buy,dblp-acm,demo",
                    help="comma-separated: names under ../shared/data, 'demo', or Parquet files")
    ap.add_argument("--designs", default="ais,poisson-adaptive")
    ap.add_argument("--widths", default="0.05,0.02")
    ap.add_argument("--budget", type=int, default=2000, help="labels per run (stages of 50)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "stopping"))
    ap.add_argument("--bayes", action="store_true", help="stop on the Bayesian interval (every stage's posterior)")
    ap.add_argument("--seed", type=int, default=0, help="the simulation's seed (other seeds: more runs for a rule)")
    from bayes_eval.results import SESSION_BAYES_DRAWS, SIMULATION_BAYES_DRAWS

    ap.add_argument("--bayes-draws", type=int, default=SIMULATION_BAYES_DRAWS,
                    help=f"posterior draws per Bayesian interval (default {SIMULATION_BAYES_DRAWS}, simulate's; a "
                         f"session uses {SESSION_BAYES_DRAWS})")
    ap.add_argument("--save-stages", action="store_true",
                    help="also write every stage's intervals per pool and design (OUT_POOL_DESIGN.npz)")
    args = ap.parse_args(argv)
    import bayes_eval as be
    from bayes_eval.registry import load_pool, measure_from_args
    from bayes_eval.results import stopping, summarize
    from bayes_eval.simulate import run_simulation

    rows, fixed = [], []
    for name in args.pools.split(","):
        path = name if name.endswith(".parquet") else os.path.join(SHARED, f"{name}.parquet")   # a file, or a name
        name = os.path.basename(name)[:-len(".parquet")] if name.endswith(".parquet") else name
        if name != "demo" and not os.path.exists(path):
            print(f"skip {name}: {path} not found")
            continue
        pool = be.demo_pool() if name == "demo" else load_pool(path)
        for design in args.designs.split(","):
            t0 = time.perf_counter()
            res, _ = run_simulation(pool, measure_from_args("f1", pool), design, budget=args.budget, batch=50,
                                    repeats=args.repeats, seed=args.seed, bayes=args.bayes, bayes_stages=args.bayes,
                                    bayes_draws=args.bayes_draws)
            secs = time.perf_counter() - t0
            if args.save_stages:                              # every stage's intervals, for rules tried later
                h = res.history
                np.savez_compressed(f"{args.out}_{name}_{design}.npz", value=h.value, lower=h.lower, upper=h.upper,
                                    n_draws=h.n_draws, n_class=h.n_class, n_labels=h.n_labels, sd=h.sd,
                                    feasible=h.feasible,
                                    check=h.check if h.check is not None else np.zeros(0),
                                    bayes_lower=res.stage_bayes_lower if res.stage_bayes_lower is not None
                                    else np.zeros(0),
                                    bayes_upper=res.stage_bayes_upper if res.stage_bayes_upper is not None
                                    else np.zeros(0), true_value=res.true_value,
                                    bayes_collapsed=res.stage_bayes_collapsed if res.stage_bayes_collapsed is not None
                                    else np.zeros(0),
                                    # which Bayesian interval (posterior.resolved_interval); files before: equal-tailed
                                    bayes_interval="highest-density",
                                    bayes_draws=res.bayes_draws if res.bayes_draws is not None else 0)
            for c in summarize(res):
                fixed.append(dict(pool=name, design=design, labels=c["labels"], rmse=c["mse"] ** 0.5,
                                  coverage_clt=c["coverage"], width_clt=c["mean_width"],
                                  coverage_cs=c.get("coverage_cs"), width_cs=c.get("mean_width_cs"),
                                  coverage_bayes=c.get("coverage_bayes"), width_bayes=c.get("mean_width_bayes")))
            for w in (float(v) for v in args.widths.split(",")):
                for kind in (("bayes", "bayes-cs", "bayes-stable", "read-first") if args.bayes else ("clt", "clt-cs")):
                    st = stopping(res, w, kind)
                    rows.append(dict(pool=name, design=design, repeats=args.repeats, **st))
                    print(name, design, w, kind, {k: st[k] for k in ("stopped", "coverage", "mean_labels")},
                          f"{secs:.0f} s", flush=True)
    stop = pd.DataFrame(rows)
    fx = pd.DataFrame(fixed)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    stop.to_csv(args.out + ".csv", index=False)
    fx.to_csv(args.out + "_fixed.csv", index=False)
    with open(args.out + ".md", "w") as f:
        f.write(f"# Stopping on the interval (F1, budget {args.budget}, batches of 50, {args.repeats} repeats)\n\n")
        f.write("`python benchmarks/stopping.py --repeats %d%s%s`\n\n" % (args.repeats, " --bayes" if args.bayes else "",
                                                                     f" --budget {args.budget}" if args.budget != 2000
                                                                     else ""))
        f.write("A run stops at the first stage end where the interval is at most W wide"
                + ("" if args.bayes else " (and it holds at least 10 labels of each class, and the CLT check passes)")
                + "; coverage = share of the stopped runs whose interval at the stop holds the true F1 "
                "(± its binomial SE).\n\n")
        f.write("| pool | design | W | interval | stopped | coverage at the stop | labels at the stop |\n")
        f.write("|---|---|---|---|---|---|---|\n")
        for r in rows:
            cov = "—" if r["coverage"] is None else f"{r['coverage']:.3f} ± {r['coverage_se']:.3f}"
            lab = "—" if r["mean_labels"] is None else f"{r['mean_labels']:.0f}"
            f.write(f"| {r['pool']} | {r['design']} | {r['width']:g} | {r['interval']} | {r['stopped']:.2f} | "
                    f"{cov} | {lab} |\n")
        f.write("\n## At fixed budgets: the CLT interval, the confidence sequence" + (", the Bayesian interval"
                                                                                  if args.bayes else "") + "\n\n")
        f.write("| pool | design | labels | RMSE | CLT coverage | CLT width | CS coverage | CS width |"
                + (" Bayes coverage | Bayes width |\n" if args.bayes else "\n"))
        f.write("|---|---|---|---|---|---|---|---|" + ("---|---|\n" if args.bayes else "\n"))
        for r in fixed:
            f.write(f"| {r['pool']} | {r['design']} | {r['labels']} | {r['rmse']:.4f} | {r['coverage_clt']:.3f} | "
                    f"{r['width_clt']:.4f} | {r['coverage_cs']:.3f} | {r['width_cs']:.4f} |"
                    + (f" {r['coverage_bayes']:.3f} | {r['width_bayes']:.4f} |\n" if args.bayes else "\n"))
    print("wrote", args.out + ".md")


if __name__ == "__main__":
    main()
