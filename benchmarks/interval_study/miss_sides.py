"""Which runs the Bayesian interval misses, and on which side, by the positives found
(issue 15, item 1: dblp-acm's under-coverage at 500 labels).  Reads the npz of
``capture_labels.py``::

    python benchmarks/interval_study/capture_labels.py ../shared/data/dblp-acm.parquet --repeats 200 --out /tmp/cap/dblp.npz
    python benchmarks/interval_study/miss_sides.py /tmp/cap/dblp.npz

Per checkpoint: coverage, runs whose interval lies above the truth ("truth below") or
below it ("truth above"), split by the number of positives labeled so far.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from bayes_eval.results import covers  # noqa: E402


def main(path):
    d = np.load(path)
    lab, t = d["labeled"], float(d["true_value"][0])
    lo, hi = d["bayes_lower"][..., 0], d["bayes_upper"][..., 0]
    print(f"{path}: {int(d['truth'][:, 1].sum())} positives in the pool, true F1 {t:.4f}, {lab.shape[0]} runs")
    for c, n in enumerate(d["checkpoints"]):
        # with the library's round-off tolerance (results.covers): an interval whose end is
        # the true F1 itself, computed in another order, holds it
        inside = covers(lo[:, c], hi[:, c], t)
        below, above = ~inside & (t < lo[:, c]), ~inside & (t > hi[:, c])
        found = lab[:, c, :, 1].sum(-1).round().astype(int)
        print(f"{int(n)} labels: coverage {1 - (below | above).mean():.3f}, truth below the interval in "
              f"{below.sum()} runs, above it in {above.sum()}, mean width {(hi[:, c] - lo[:, c]).mean():.3f}")
        for k in np.unique(found):
            m = found == k
            print(f"   {k} positives found: {m.sum()} runs, truth below {(below & m).sum()}, above {(above & m).sum()}, "
                  f"mean interval [{lo[m, c].mean():.3f}, {hi[m, c].mean():.3f}]")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        main(p)
