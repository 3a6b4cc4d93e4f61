"""Compare sampling designs on a pool with known labels (a simulation study in a few lines).

    python examples/compare_designs.py [POOL.parquet] [--repeats 100] [--budget 2000]

Without a pool file it uses the built-in synthetic demo pool.  For each design it prints
the MSE of the F1 estimate and the coverage of its 95% CLT interval after 500, 1000 and
2000 labels (40 stages of 50 labels, deterministic oracle).
"""
import argparse

import bayes_eval as be
from bayes_eval import measures as M


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("pool", nargs="?", default=None)
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--budget", type=int, default=2000)
    args = ap.parse_args(argv)
    pool = be.demo_pool() if args.pool is None else be.Pool.from_file(args.pool)
    f1 = M.f1()
    print(pool, "true F1 =", round(float(pool.true_value(f1)[0]), 4))
    checkpoints = [c for c in (500, 1000, 2000) if c <= args.budget]
    for design, kw in [("passive", {}), ("is", {"lam": 1.0}), ("oasis", {}), ("ais", {"depth": 8})]:
        res, _ = be.run_simulation(pool, f1, design, budget=args.budget, repeats=args.repeats, seed=0,
                                   checkpoints=checkpoints, track_kl=False, **kw)
        rows = be.summarize(res)
        cells = "  ".join(
            f"@{r['labels']}: mse={r['mse']:.2e} cov={r['coverage']:.2f}" if r["mse"] is not None
            else f"@{r['labels']}: undefined" for r in rows)
        print(f"{design:>8}  {cells}   ({res.seconds / args.repeats * 1000:.1f} ms/run)")


if __name__ == "__main__":
    main()
