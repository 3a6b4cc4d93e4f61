"""Statistics shared by the benchmark scripts (``run.py``, ``f1_mse.py``, ``poisson_f1.py``).

Imported as ``from stats import bootstrap_ci``: a script run as ``python benchmarks/X.py``
has this folder first on ``sys.path``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["bootstrap_ci"]


def bootstrap_ci(x, n_boot: int = 2000, seed: int = 0):
    """Percentile-bootstrap interval of the mean of ``x`` over repeats.

    ``n_boot`` resamples of ``x`` with replacement (one generator seeded with ``seed``),
    the mean of each, and their 2.5% and 97.5% quantiles — e.g. the 95% interval of an
    MSE from the squared errors of the runs.

    Returns
    -------
    (float, float)
        Lower and upper end; (nan, nan) with fewer than two values.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size < 2:
        return (np.nan, np.nan)
    rng = np.random.default_rng(seed)
    boots = x[rng.integers(0, x.size, (n_boot, x.size))].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return (float(lo), float(hi))
