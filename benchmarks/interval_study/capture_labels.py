"""Capture the labeled tables of simulated runs at the checkpoints, for interval studies
that try other posterior models on the same runs (issue 15, the monotone-model route).

    taskset -c 0 python benchmarks/interval_study/capture_labels.py POOL --design ais \\
        --repeats 200 --out /tmp/mono/abt-buy_ais.npz

The npz holds ``labeled`` (R, n_checkpoints, X, C), the cells (``stratum``, ``size``,
``weight``, ``loss``, ``truth``), ``leaf_probs`` (K, 2), the checkpoints, the true F1, the
design's estimates at the checkpoints (``value``) and today's Bayesian interval
(``bayes_lower`` / ``bayes_upper``) for comparison.
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
from typing import NamedTuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval import measures as M  # noqa: E402
from bayes_eval import simulate as S  # noqa: E402
from bayes_eval.cells import build_cells, leaf_probs, posterior_units  # noqa: E402
from bayes_eval.models.calibrated import score_logit  # noqa: E402
from bayes_eval.registry import load_pool  # noqa: E402
from bayes_eval.strata import stratify  # noqa: E402


class Capture(NamedTuple):
    """A capture read back beside its pool: what the studies of captured runs share."""
    pool: object        # the Pool
    data: object        # the npz (``labeled``, ``true_value``, ``checkpoints``, the cells, ...)
    units: object       # the calibrated model's posterior units (per cell): ``units.cells``, ``n_units``, ``probs``
    z: object           # logit of each unit's classifier probability (the curve's abscissa)
    g: object           # F1's g(R)
    truth: float        # the pool's F1
    item_cell: object   # (N,) the simulation cell of every item (``build_cells``'s second output)
    cells: object = None    # the simulation's cells (``build_cells``), whose tables ``labeled`` counts
    n_strata: int = 0       # the strata of the default stratification


def load_capture(pool_path, capture):
    """Read ``capture`` (this script's npz) and rebuild ``pool_path``'s cells and posterior units
    as the simulation built them (its default stratification); refuse a capture of another pool."""
    pool, d = load_pool(pool_path), np.load(capture)
    n_strata = inspect.signature(S.run_simulation).parameters["n_strata"].default
    strata = stratify(pool, n_strata)
    cells, item_cell = build_cells(pool, strata, M.get("f1"))
    if not np.allclose(np.asarray(cells.size), d["size"]):
        raise SystemExit(f"{capture}: its cells are not {pool_path}'s")
    units = posterior_units(cells, strata.n_strata, "cell")
    z = score_logit(units.probs)    # the library's clipped logit: a unit at 0 or 1 (ties) is no NaN
    return Capture(pool, d, units, z, M.get("f1").g, float(d["true_value"][0]), np.asarray(item_cell), cells,
                   strata.n_strata)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pool")
    ap.add_argument("--design", default="ais")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    captured = {}
    real = S.intervals_at_checkpoints

    def spy(cells, model, g, n_strata, labeled, *args, **kw):
        captured["labeled"] = np.asarray(labeled)
        captured["n_strata"] = n_strata
        return real(cells, model, g, n_strata, labeled, *args, **kw)

    S.intervals_at_checkpoints = spy
    pool = load_pool(a.pool)
    res, cells = S.run_simulation(pool, M.get("f1"), a.design, repeats=a.repeats, seed=a.seed, bayes=True)
    k = captured["n_strata"]
    np.savez_compressed(
        a.out, labeled=captured["labeled"], stratum=np.asarray(cells.stratum), size=np.asarray(cells.size),
        weight=np.asarray(cells.weight), loss=np.asarray(cells.loss), truth=np.asarray(cells.truth),
        leaf_probs=np.asarray(leaf_probs(cells, k)), true_value=np.asarray(res.true_value),
        value=np.asarray(res.checkpoint_value), bayes_lower=np.asarray(res.bayes_lower), bayes_upper=np.asarray(res.bayes_upper),
        checkpoints=np.asarray(res.checkpoints), labels=np.asarray(res.checkpoint_labels))
    print("saved", a.out, captured["labeled"].shape)


if __name__ == "__main__":
    main()
