"""Each class of a pool of several classes: the finite-pool posterior of its F1, precision and
recall, given a session's labels -- what the report of a session of macro-F1, micro-F1 or
accuracy adds beside the measure.

Why: macro-F1 is the mean of the classes' F1 (000 App. D.3), and an analyst who reads it wants to
know which class pulls it down; the posterior the session's Bayesian interval already samples
holds every class's counts.  ``measures.per_class_scores`` (re-exported here) is that measure --
the same loss as :func:`bayes_eval.measures.macro_f1` (ℓ = [TP_c, T_c, P_c], d = 3C), so it has
the same cells -- with g(R) the C F1s, the C precisions TP_c / P_c and the C recalls TP_c / T_c
(3C components).
:func:`per_class_table` takes its posterior by ``SessionReports.posterior_of``: the session's
posterior model fitted to the same labels with the same key, so the mean of the classes' F1 draws
is the session's macro-F1 draw for draw (``tests/test_several_classes.py``).  The intervals are
the session's own kind (``posterior.bayesian_interval``: equal-tailed with several classes).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .measures import per_class_scores

__all__ = ["per_class_scores", "per_class_table"]


def per_class_table(session, level: float = 0.95, n_draws: int = 1000, class_names=None) -> pd.DataFrame | None:
    """One row per class: its name, its labels in the estimate, and the posterior median and
    ``level`` interval (``posterior.bayesian_interval``) of its F1, precision and recall on the pool (columns
    ``f1``, ``f1_lower``, ``f1_upper``, ... ).  None where the session offers no posterior (no
    model, a partitioned pool) or its pool has two classes.
    ``class_names``: {class: name} (default: ``Session.class_names``, the label maps, else
    ``class c``)."""
    from .posterior import bayesian_interval

    c = int(session.pool.n_classes)
    if c <= 2:
        return None
    draws = session.posterior_of(per_class_scores(c, int(session.config.get("system", 0))), n_draws=n_draws)
    if draws is None:
        return None
    if class_names is None:
        class_names = {k: name for k, name in enumerate(session.class_names) if name is not None}
    draws = np.asarray(draws, np.float64)
    lo, hi = bayesian_interval(draws, level, c)
    lo, hi = np.asarray(lo), np.asarray(hi)
    with np.errstate(all="ignore"):
        med = np.nanmedian(draws, axis=0)
    out = {"class": [class_names.get(k, f"class {k}") for k in range(c)],
           "labels": [int(x) for x in session.labels_per_class()]}
    for j, kind in enumerate(("f1", "precision", "recall")):
        sl = slice(j * c, (j + 1) * c)
        out[kind], out[f"{kind}_lower"], out[f"{kind}_upper"] = med[sl], lo[sl], hi[sl]
    return pd.DataFrame(out)
