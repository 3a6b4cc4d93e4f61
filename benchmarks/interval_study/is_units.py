"""Static IS's Bayesian interval with the calibrated model's units left unmerged (stop 76).

``cells.posterior_units(by="cell")`` merges the ``is`` / ``poisson`` designs' cells across their fine
prior key (the proposal differs there, the model's rate is shared).  Under a stochastic oracle a
unit's observations then come from its cells at different rates; this runs ``is`` with every cell its
own unit (``fine``) or as the library does (``merged``) to see whether that is where its Bayesian
interval falls short.

    python benchmarks/interval_study/is_units.py POOL.parquet REPEATS {fine,merged} {stochastic,deterministic}

One line per checkpoint: pool, units, oracle, labels, Bayesian coverage, mean width, RMSE of the estimate
(F1; budget 2000 in stages of 50; seed 1).
"""
import sys

import jax.numpy as jnp
import numpy as np

import bayes_eval.cells as C
import bayes_eval.simulate as S
from bayes_eval.pool import Pool
from bayes_eval.registry import measure_from_args
from bayes_eval.results import summarize


def every_cell_a_unit(cells, n_strata, by="cell"):
    """:func:`bayes_eval.cells.posterior_units` with no merging: unit = cell, its prior the cell's."""
    if by != "cell":
        return C.posterior_units(cells, n_strata, by)
    n = int(np.asarray(cells.stratum).shape[0])
    return C.PosteriorUnits(cells._replace(stratum=jnp.arange(n, dtype=jnp.int32)), n,
                            np.asarray(cells.prior, np.float64), np.asarray(cells.stratum, np.int64))


def main(path, repeats, units, oracle):
    if units == "fine":
        S.posterior_units = every_cell_a_unit
    pool = Pool.from_file(path)
    kw = {"oracle": "stochastic"} if oracle == "stochastic" else {}
    res, _ = S.run_simulation(pool, measure_from_args("f1", pool), "is", budget=2000, batch=50, repeats=int(repeats),
                              seed=1, checkpoints=(500, 1000, 2000), bayes=True, track_kl=False, **kw)
    for r in summarize(res):
        print(path.split("/")[-1], units, oracle, r["labels"], round(r["coverage_bayes"], 4),
              round(r["mean_width_bayes"], 4), round(r["mse"] ** 0.5, 4))


if __name__ == "__main__":
    main(*sys.argv[1:5])
