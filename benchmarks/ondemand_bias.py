"""Issue 17: a quick bias / cost check of on-demand protocols on one setting.

    taskset -c 1 .venv/bin/python benchmarks/ondemand_bias.py REPEATS KIND[,KIND...] [SETTING] [SEED]

Runs ``ondemand_sim.simulate`` with ("simple",) + KINDS (SETTING: ``synthetic``, 10 systems, or a
pool name under /work/shared/data) and prints, per protocol: cost / simple, the share of (run,
system) pairs at ε at submission and at the end, precision coverage (min / mean / max over
systems) and z = mean error / Monte Carlo SE per system with their sum.  The numbers quoted in
``benchmarks/results/ondemand.md`` ("Variants measured on the way") come from this script.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bayes_eval import ondemand_sim as sim  # noqa: E402


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    R, kinds = int(argv[0]), tuple(argv[1].split(","))
    setting = argv[2] if len(argv) > 2 else "synthetic"
    seed = int(argv[3]) if len(argv) > 3 else 0
    if setting == "synthetic":
        s = sim.synthetic_setting(10, seed=0)
    else:
        s = sim.pool_setting(pd.read_parquet(f"/work/shared/data/{setting}.parquet"), 10, seed=0, name=setting)
    t = time.time()
    raw = sim.simulate(s, 0.05, R, seed, pairs=((0, 1),), protocols=("simple",) + kinds)
    raw["runs"]["joint"] = raw["runs"][kinds[0]]             # summarize() reads a "joint" run
    o = sim.summarize(raw)
    print(setting, R, "seed", seed, "seconds", round(time.time() - t), flush=True)
    for k in kinds:
        z = [r["precision"][k]["bias"] / r["precision"][k]["bias_se"] for r in o["systems"]]
        cov = [r["precision"][k]["coverage"] for r in o["systems"]]
        print(f"{k:28s} ratio {o['cost'][k] / o['cost']['simple']:.3f} at_sub {o['reached_at_submission'][k]:.3f} "
              f"final {o['reached'][k]:.3f} cov {min(cov):.3f}/{np.mean(cov):.3f}/{max(cov):.3f} "
              f"z {' '.join(f'{v:+.1f}' for v in z)} sum {sum(z):+.1f}", flush=True)


if __name__ == "__main__":
    main()
