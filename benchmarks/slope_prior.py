"""Probe (stop 82): the calibrated model's Bayesian interval on a pool whose margins are
under-confident -- the true log-odds 3·score − 1.44, a logistic curve the model can fit, but of
slope 3 where the model's prior centres the slope at 1 (``models/calibrated.py``: b ~ N(1, 1.5²)).

A new user's walk found the Bayesian interval of F1 covering 0.86 over 100 AIS runs at 150 and 300
labels of such a pool (3,000 items, 160 positives), its posterior mean 0.70-0.72 against 0.753;
the same pool with its scores multiplied by 3 (slope 1) covers 0.93-0.94.  This script reruns
those cells and the two variants of the model that locate the cause, by patching the prior's
slope scale and the number of band offsets before anything is compiled:

    python benchmarks/slope_prior.py --b-sd 1.5 --bands 6          # the model as shipped
    python benchmarks/slope_prior.py --b-sd 4 --bands 6            # a wider prior on the slope
    python benchmarks/slope_prior.py --b-sd 1.5 --bands 0          # no band offsets
    python benchmarks/slope_prior.py --b-sd 1.5 --bands 6 --scale 3   # the same pool at slope 1
    python benchmarks/slope_prior.py --b-sd 1.5 --pool ../shared/data/abt-buy.parquet --oracle stochastic \
        --budget 2000 --checkpoints 500,1000,2000 --repeats 200 --seed 0 --draws 200   # a stochastic-oracle cell

Each run: 100 AIS runs, 1000 posterior draws, ~3 min on 2 cores.  Results:
``benchmarks/results/slope_prior.md``.
"""
import argparse

import numpy as np
import pandas as pd


def pool_frame(scale: float = 1.0, n: int = 3000, seed: int = 1) -> pd.DataFrame:
    """3,000 items, 5% positive, score ~ N(3y − 2, 1): the log-odds of a positive are exactly
    3·score − 1.44 (``scale`` multiplies the scores: 3 makes the slope 1)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.05).astype(np.int8)
    s = rng.normal(size=n) - 2 + 3.0 * y
    return pd.DataFrame({"item": np.arange(n), "score": s * scale, "pred": (s >= 0).astype(np.int8), "label": y})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--b-sd", default=None,
                    help="the posterior model's prior sd of the curve's slope b (shipped: 2.5 since stop 83, 1.5 before); "
                         "several, comma-separated: σ_b learned over that grid (calibrated.SLOPE_SD)")
    ap.add_argument("--companion-b-sd", type=float, default=None,
                    help="the designs' companion model's prior sd of b (shipped: 1.5)")
    ap.add_argument("--bands", type=int, default=6, help="band offsets of the posterior model (shipped: 6)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the scores (3: a curve of slope 1)")
    ap.add_argument("--pool", default=None, help="another pool file (default: the slope-3 pool above)")
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--checkpoints", default="150,300")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--oracle", default="deterministic", choices=("deterministic", "stochastic"),
                    help="stochastic: every draw a label (the record's stochastic-oracle cells: --draws 200 --seed 0)")
    args = ap.parse_args(argv)

    from bayes_eval.models import calibrated as C
    from bayes_eval.models import registry as R

    if args.b_sd is not None:   # read when the model is traced: patched before anything compiles
        sds = tuple(float(v) for v in args.b_sd.split(","))
        C.POSTERIOR_PRIOR["b"] = (1.0, sds[-1])
        R.SLOPE_SD = sds if len(sds) > 1 else None
    if args.companion_b_sd is not None:
        C.PRIOR["b"] = (1.0, args.companion_b_sd)
    R.BANDS = args.bands

    from bayes_eval import measures as M
    from bayes_eval.pool import Pool
    from bayes_eval.results import summarize
    from bayes_eval.simulate import run_simulation

    if args.pool:
        from bayes_eval.registry import load_pool

        pool = load_pool(args.pool)
    else:
        pool = Pool.from_frame(pool_frame(args.scale))
    res, _ = run_simulation(pool, M.f1(), "ais", budget=args.budget, batch=50, repeats=args.repeats, seed=args.seed,
                            checkpoints=tuple(int(c) for c in args.checkpoints.split(",")), bayes=True,
                            bayes_draws=args.draws,
                            **({"oracle": args.oracle} if args.oracle != "deterministic" else {}))
    truth = float(res.true_value[0])
    print(f"posterior b sd {R.SLOPE_SD or C.POSTERIOR_PRIOR['b'][1]}, companion b sd {C.PRIOR['b'][1]:g}, {args.bands} bands, scores x{args.scale:g}: true F1 {truth:.4f}")
    print("labels  CLT cov  Bayes cov  Bayes width  posterior mean  estimate mean")
    for c in summarize(res):
        print(f"{c['labels']:>6}  {c['coverage']:>7.2f}  {c['coverage_bayes']:>9.2f}  {c['mean_width_bayes']:>11.4f}  "
              f"{c['mean_bayes']:>14.4f}  {c['mean']:>13.4f}")


if __name__ == "__main__":
    main()
