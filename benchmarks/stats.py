"""Statistics and tables shared by the benchmark scripts (``run.py``, ``f1_mse.py``,
``poisson_f1.py``, ``ondemand.py``).

Imported as ``from stats import bootstrap_ci, md_table``: a script run as
``python benchmarks/X.py`` has this folder first on ``sys.path``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["bootstrap_ci", "md_table", "write_lines"]


def md_table(header, rows) -> list:
    """A markdown table as lines: ``| h1 | h2 |``, the ``|---|---|`` separator, then
    ``| c1 | c2 |`` per row of ``rows`` (cells already formatted; anything else is ``str``-ed)."""
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def write_lines(path: str, lines) -> None:
    """Write ``lines`` to ``path``, one a line, ending with a newline."""
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


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
