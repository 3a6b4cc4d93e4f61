"""Every stage's Bayesian interval at two credibility levels, for stopping rules that gate
on a stricter interval than the one they report (issue 15, item 3: at W = 0.02 on dblp-acm
the per-cell posterior's 95% interval stopped 4 of 100 runs, all wrong).

    taskset -c 0 python benchmarks/interval_study/stop_level_study.py dblp-acm --out /tmp/stoplevel/dblp-acm.npz

The npz holds what ``benchmarks/stopping.py --save-stages`` writes (``bayes_lower`` /
``bayes_upper`` at 95%) plus ``bayes_lower_2`` / ``bayes_upper_2`` at ``--level2``, from the
same posterior draws.  Same runs as ``stopping.py`` (F1, ais, budget 2000, batches of 50,
seed 0).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval import simulate as S  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool", help="a name under ../shared/data, 'demo', or a Parquet file")
    ap.add_argument("--design", default="ais")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--level2", type=float, default=0.99)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import bayes_eval as be
    from bayes_eval.registry import load_pool, measure_from_args

    second = {}
    real = S.intervals_at_checkpoints

    def both(cells, model, g, n_strata, labeled, seed, n_draws, level=0.95, **kw):
        out = real(cells, model, g, n_strata, labeled, seed, n_draws, level, **kw)
        if labeled.shape[1] > 3:          # the per-stage call (the checkpoint call has 3)
            two = real(cells, model, g, n_strata, labeled, seed, n_draws, a.level2, **kw)   # same keys: same draws
            second["lower"], second["upper"] = two["bayes_lower"], two["bayes_upper"]
        return out

    S.intervals_at_checkpoints = both
    name = a.pool
    if name == "demo":
        pool = be.demo_pool()
    else:
        path = name if name.endswith(".parquet") else os.path.join(SHARED, f"{name}.parquet")
        pool = load_pool(path)
    t0 = time.perf_counter()
    res, _ = S.run_simulation(pool, measure_from_args("f1", pool), a.design, budget=2000, batch=50,
                              repeats=a.repeats, seed=0, bayes=True, bayes_stages=True)
    h = res.history
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    np.savez_compressed(a.out, value=h.value, lower=h.lower, upper=h.upper, n_draws=h.n_draws, n_class=h.n_class,
                        n_labels=h.n_labels, check=h.check if h.check is not None else np.zeros(0),
                        bayes_lower=res.stage_bayes_lower, bayes_upper=res.stage_bayes_upper,
                        bayes_lower_2=second["lower"], bayes_upper_2=second["upper"], level2=a.level2,
                        true_value=res.true_value)
    print("saved", a.out, f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
