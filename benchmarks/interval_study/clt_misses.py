"""Why a design's fixed-n CLT interval misses on a pool: per checkpoint, the quantiles of its
width and of the estimate's error over runs, and on which side the missed runs lie (issue 15;
the Poisson designs on the heavy-ties pool, ``benchmarks/results/audit_floor.md``)::

    python benchmarks/interval_study/make_pools.py /tmp/heldout --kinds
    python benchmarks/interval_study/clt_misses.py /tmp/heldout/prob_ties.parquet poisson-adaptive --repeats 300 --seed 1

F1, budget 2000 in stages (rounds) of 50, checkpoints 500 / 1000 / 2000, no Bayesian interval.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bayes_eval.pool import Pool  # noqa: E402
from bayes_eval.registry import measure_from_args  # noqa: E402
from bayes_eval.results import covers  # noqa: E402
from bayes_eval.simulate import run_simulation  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pool")
    ap.add_argument("design")
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    pool = Pool.from_file(a.pool)
    res, _ = run_simulation(pool, measure_from_args("f1", pool), a.design, budget=2000, batch=50, repeats=a.repeats,
                            seed=a.seed, checkpoints=(500, 1000, 2000), bayes=False, track_kl=False)
    t = float(res.true_value[0])
    q = [0.0, 0.1, 0.5, 0.9, 1.0]
    print(f"{a.pool}, {a.design}: true F1 {t:.4f}, {a.repeats} runs (seed {a.seed}), stalled runs "
          f"{int(np.asarray(res.stalled).sum())}")
    print("| labels | CLT coverage | width: min / 10% / median / 90% / max | error: min / 10% / median / 90% / max "
          "| misses above the truth | median width, error of the missed |")
    print("|---|---|---|---|---|---|")
    for i, ck in enumerate(res.checkpoints):
        v, lo, hi = (x[:, i, 0] for x in (res.checkpoint_value, res.checkpoint_lower, res.checkpoint_upper))
        w, err = hi - lo, v - t
        miss = ~covers(lo, hi, t)
        fq = lambda x: " / ".join(f"{e:+.4f}" if np.any(x < 0) else f"{e:.4f}" for e in np.quantile(x, q))  # noqa: E731
        tail = (f"{(err[miss] > 0).mean():.2f} | {np.median(w[miss]):.4f}, {np.median(err[miss]):+.4f}" if miss.any()
                else "– | –")
        print(f"| {ck} | {1 - miss.mean():.3f} | {fq(w)} | {fq(err)} | {tail} |")


if __name__ == "__main__":
    main()
