"""AUC from data whose negatives were subsampled (004 §"AUC").

**Estimator.**  The pairwise ("probability of correct pairwise comparison") form of 004
§"AUC", ``AUC = E[1{φ(x₊) > φ(x₋)} + ½ 1{φ(x₊) = φ(x₋)}]``, weighted by the rows' inverse
inclusion probabilities ``w = 1/b``:

    ÂUC = Σ_{i pos} Σ_{j neg} w_i w_j K(s_i, s_j) / (W₊ W₋),   W₊ = Σ_pos w, W₋ = Σ_neg w.

Under *oblivious* negative subsampling (every negative kept with the same ``l``) the
weights are constant within each class and cancel: the plain empirical AUC of the kept rows,
which 004 §"AUC" shows is unbiased ("using a historical data set where the negative
examples have been obliviously subsampled does not introduce bias"); with per-row
inclusion probabilities the weights are needed (a score-dependent thinning biases the
unweighted AUC — the tests' negative control).  Computed in O(n log n) by sorting.

**Intervals** — two CLT intervals and one distribution-free bound; ``interval_kind`` names
which:

* ``"clt-delong-data"`` — truth = the AUC of the full data before subsampling.  The AUC is
  linearized through DeLong's placement values (V₁₀ᵢ = weighted share of negatives below
  positive i, V₀₁ⱼ = weighted share of positives above negative j):
  ``zᵢ = (V₁₀ᵢ − ÂUC)/W₊`` for a positive row, ``zⱼ = (V₀₁ⱼ − ÂUC)/W₋`` for a negative
  one, and the Poisson-sampling variance of the HT totals is
  ``Σ w (w − 1) z²`` (:func:`bayes_eval.poisson.ht_covariance`, 000 eq. 28).  Rows with
  ``b = 1`` (the positives under a keep rate) contribute nothing: only the thinning is random.
* ``"clt-delong"`` — truth = the population AUC (DeLong, DeLong & Clarke-Pearson 1988, with
  weights): ``Σ w² z²`` with Bessel's factor nₖ/(nₖ − 1) per class — the full data's own
  sampling plus the thinning.  ``"clt-hanley-mcneil"``: Hanley & McNeil's (1982) variance
  ``[A(1−A) + (n₊−1)(Q₁−A²) + (n₋−1)(Q₂−A²)] / (n₊ n₋)``, Q₁ = A/(2−A), Q₂ = 2A²/(1+A),
  with the Kish effective counts of each class (the kept counts under a keep rate).
* ``"bound-agarwal"`` — the distribution-free deviation bound 004 quotes from Agarwal et
  al. (2005, Thm. 3): with probability ≥ 1 − δ,
  ``|AUC_e − AUC| < sqrt(ln(2/δ) / (2 ρ (1 − ρ) N))``, ρ the positive share and N the rows
  of the sample (kept rows: the kept negatives are an i.i.d. sample of the negatives, so
  the bound holds for the population AUC).  It is a bound, not a CLT interval: far wider.

**Planning** (004 §"AUC", "for a fixed total number of examples N what is the ratio of
positive and negative examples that minimizes the deviation bound?  ρ = 1/2"):
:func:`plan` tabulates, for a budget of N rows, the bound's width and the Hanley–McNeil CLT
width at each positive share ρ, how many negatives to keep and at which keep rate, and the
best feasible ρ (1:1 unless fewer than N/2 positives exist).
"""
from __future__ import annotations

import numpy as np

from . import _config  # noqa: F401
from .errors import PoolError, UsageError
from .subsampled import (TARGETS, SubsampledEstimate, check_binary, check_finite, inclusion_probabilities,
                         kish_n)

__all__ = ["INTERVALS", "placements", "auc_core", "auc", "agarwal_epsilon", "hanley_mcneil_var", "plan"]

INTERVALS = ("delong", "hanley-mcneil", "agarwal")
#: fewest kept negatives ranked above some positive (and rows of each class) for ``clt_ok``
MIN_DISCORDANT = 10


def _weighted_rank_sums(sorted_s, sorted_w, s):
    """(weight strictly below s, weight equal to s) among the sorted values."""
    cw = np.concatenate([[0.0], np.cumsum(sorted_w)])
    lo = np.searchsorted(sorted_s, s, side="left")
    hi = np.searchsorted(sorted_s, s, side="right")
    return cw[lo], cw[hi] - cw[lo]


def placements(scores, labels, w):
    """DeLong placement values with weights: ``(V10 (n₊,), V01 (n₋,), auc, W₊, W₋)``.

    V10ᵢ = (weight of negatives below sᵢ + ½ tied) / W₋ for each positive; V01ⱼ = (weight
    of positives above sⱼ + ½ tied) / W₊ for each negative; ÂUC = Σ wᵢ V10ᵢ / W₊."""
    s = np.asarray(scores, float)
    y = np.asarray(labels).astype(bool)
    w = np.asarray(w, float)
    sp, wp, sn, wn = s[y], w[y], s[~y], w[~y]
    on, op = np.argsort(sn, kind="stable"), np.argsort(sp, kind="stable")
    Wp, Wn = wp.sum(), wn.sum()
    below, eq = _weighted_rank_sums(sn[on], wn[on], sp)
    v10 = (below + 0.5 * eq) / Wn
    below_p, eq_p = _weighted_rank_sums(sp[op], wp[op], sn)
    v01 = (Wp - below_p - eq_p + 0.5 * eq_p) / Wp
    a = float(wp @ v10 / Wp)
    return v10, v01, a, Wp, Wn


def auc_core(scores, labels, b):
    """``(auc, var_data, var_population, n_discordant)`` of the weighted pairwise AUC (module
    docstring); ``n_discordant`` counts the kept negatives ranked above some positive, the
    rows the data-target variance rests on (few of them: no CLT, see the module docstring)."""
    y = np.asarray(labels).astype(bool)
    b = np.asarray(b, float)
    w = 1.0 / b
    v10, v01, a, Wp, Wn = placements(scores, y, w)
    z = np.empty(len(y))
    z[y] = (v10 - a) / Wp
    z[~y] = (v01 - a) / Wn
    # the Poisson-sampling variance of 000 eq. 28 (:func:`bayes_eval.poisson.ht_covariance`
    # with unit item weights), in NumPy: kept-row counts vary from call to call and JAX
    # would compile for every new length
    var_data = float(np.sum(w * (w - 1.0) * z * z))
    npos, nneg = int(y.sum()), int((~y).sum())
    bes_p = npos / (npos - 1) if npos > 1 else np.nan
    bes_n = nneg / (nneg - 1) if nneg > 1 else np.nan
    wz2 = (w * z) ** 2
    var_pop = float(bes_p * wz2[y].sum() + bes_n * wz2[~y].sum())
    return a, var_data, var_pop, int(np.sum(v01 < 1.0))


def hanley_mcneil_var(a, n_pos, n_neg):
    """Hanley & McNeil (1982) variance of the empirical AUC ``a`` with ``n_pos`` positives
    and ``n_neg`` negatives (numpy, broadcasts)."""
    a = np.asarray(a, float)
    q1 = a / (2.0 - a)
    q2 = 2.0 * a * a / (1.0 + a)
    return (a * (1 - a) + (n_pos - 1) * (q1 - a * a) + (n_neg - 1) * (q2 - a * a)) / (n_pos * n_neg)


def agarwal_epsilon(n_rows, rho, delta: float = 0.05):
    """The deviation of Agarwal et al.'s Thm. 3 as quoted in 004 §"AUC":
    ``sqrt(ln(2/δ) / (2 ρ (1 − ρ) N))`` (numpy, broadcasts; ∞ where ρ ∈ {0, 1})."""
    n_rows = np.asarray(n_rows, float)
    rho = np.asarray(rho, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(np.log(2.0 / delta) / (2.0 * rho * (1.0 - rho) * n_rows))


def _z(level):
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2.0))


def auc(labels, scores, *, keep_rate=None, keep_prob=None, target: str = "data", interval: str = "delong",
        level: float = 0.95, delta: float | None = None) -> SubsampledEstimate:
    """The AUC of ``scores`` from subsampled rows (004 §"AUC"; module docstring).

    ``interval``: ``"delong"`` (CLT; ``target="data"``: truth = the full data's AUC, the
    thinning only; ``"population"``: DeLong's variance), ``"hanley-mcneil"`` (CLT, population)
    or ``"agarwal"`` (the distribution-free bound at ``delta``, default ``1 − level``).  The
    record's ``extra`` carries every variance and the bound's half-width either way."""
    y = check_binary(labels, "label")
    s = check_finite(scores, "score")
    if len(s) != len(y):
        raise PoolError(f"columns have different lengths: label {len(y)}, score {len(s)}")
    if target not in TARGETS:
        raise UsageError(f"target must be one of {TARGETS}, got {target!r}")
    if interval not in INTERVALS:
        raise UsageError(f"interval must be one of {INTERVALS}, got {interval!r}")
    if not (y == 1).any():
        raise PoolError("column 'label': no positive row (label = 1): the AUC is undefined")
    if not (y == 0).any():
        raise PoolError("column 'label': no negative row (label = 0): the AUC is undefined")
    b = inclusion_probabilities(y == 1, keep_rate, keep_prob)
    w = 1.0 / b
    a, var_data, var_pop, n_disc = auc_core(s, y, b)
    pos = y == 1
    n_pos, n_neg = kish_n(w[pos]), kish_n(w[~pos])
    var_hm = float(hanley_mcneil_var(a, n_pos, n_neg))
    delta = 1.0 - level if delta is None else float(delta)
    eps = float(agarwal_epsilon(n_pos + n_neg, n_pos / (n_pos + n_neg), delta))
    if interval == "agarwal":
        var, half, kind = var_pop, eps, "bound-agarwal"
    elif interval == "hanley-mcneil":
        var, kind = var_hm, "clt-hanley-mcneil"
        half = _z(level) * np.sqrt(max(var, 0.0))
    else:
        var = var_data if target == "data" else var_pop
        kind = "clt-delong-data" if target == "data" else "clt-delong"
        half = _z(level) * np.sqrt(max(var, 0.0))
    lo, hi = max(a - half, 0.0), min(a + half, 1.0)
    extra = {"var_delong_data": var_data, "var_delong": var_pop, "var_hanley_mcneil": var_hm,
             "agarwal_epsilon": eps, "delta": delta, "n_pos": int(pos.sum()), "n_neg": int((~pos).sum()),
             "kish_n_pos": n_pos, "kish_n_neg": n_neg, "target": target, "level": level,
             "kish_n": kish_n(w), "n_discordant_neg": n_disc,
             "clt_ok": bool(n_disc >= MIN_DISCORDANT and min(pos.sum(), (~pos).sum()) >= MIN_DISCORDANT)}
    return SubsampledEstimate("auc", np.array([a]), (np.array([lo]), np.array([hi])), kind, len(y),
                              float(w.sum()), ("auc",), np.array([var]), extra)


def plan(budget: int, n_pos_available=None, n_neg_available=None, *, delta: float = 0.05, auc_guess=None,
         level: float = 0.95, rhos=None) -> dict:
    """The AUC planning tool of 004 §"AUC": for a budget of ``budget`` rows, at each
    positive share ρ (default 0.02..0.98 in steps of 0.02, finer where fewer than ten of
    those are feasible, and the best ρ), the rows of each class, the keep rate of the
    negatives (when ``n_neg_available`` is known), the width 2ε of Agarwal et al.'s bound
    and — with ``auc_guess`` — the width of the Hanley–McNeil CLT interval.  ``best`` is the
    feasible ρ with the narrowest bound: 1/2 (the seed's 1:1) unless fewer than N/2
    positives (or negatives) exist, then as close to 1/2 as they allow."""
    N = int(budget)
    if N < 2:
        raise UsageError(f"the planning budget must be at least 2 rows, got {budget!r}")
    # the optimum: rho = 1/2 clipped to what the data allow
    lo_r = 0.0 if n_neg_available is None else max(0.0, 1.0 - n_neg_available / N)
    hi_r = 1.0 if n_pos_available is None else min(1.0, n_pos_available / N)
    if lo_r > hi_r:
        raise UsageError(f"a budget of {N} rows exceeds the {n_pos_available} + {n_neg_available} rows available")
    r_best = float(np.clip(0.5, lo_r, hi_r))
    if rhos is None:
        rhos = np.round(np.arange(0.02, 0.981, 0.02), 10)
        inside = (rhos >= lo_r) & (rhos <= hi_r)
        if inside.sum() < 10:   # few positives (or negatives) for the budget: a finer grid where ρ is feasible
            rhos = np.concatenate([rhos, np.linspace(max(lo_r, 1.0 / N), hi_r, 12)])
        rhos = np.unique(np.round(np.append(rhos, r_best), 10))   # the best ρ is a row of the table too
    else:
        rhos = np.asarray(rhos, float)
    n_pos = np.maximum(np.round(rhos * N), 1)
    n_neg = np.maximum(N - n_pos, 1)
    feasible = np.ones(len(rhos), bool)
    if n_pos_available is not None:
        feasible &= n_pos <= n_pos_available
    if n_neg_available is not None:
        feasible &= n_neg <= n_neg_available
    eps = agarwal_epsilon(N, n_pos / N, delta)
    table = {"rho": rhos, "n_pos": n_pos.astype(int), "n_neg_keep": n_neg.astype(int),
             "bound_width": 2 * eps, "feasible": feasible}
    if n_neg_available is not None:
        table["neg_keep_rate"] = np.minimum(n_neg / float(n_neg_available), 1.0)
    if auc_guess is not None:
        table["clt_width"] = 2 * _z(level) * np.sqrt(hanley_mcneil_var(float(auc_guess), n_pos, n_neg))
    npb = max(int(round(r_best * N)), 1)
    best = {"rho": r_best, "n_pos": npb, "n_neg_keep": N - npb,
            "bound_width": float(2 * agarwal_epsilon(N, npb / N, delta))}
    if n_neg_available is not None:
        best["neg_keep_rate"] = min((N - npb) / float(n_neg_available), 1.0)
    if auc_guess is not None:
        best["clt_width"] = float(2 * _z(level) * np.sqrt(hanley_mcneil_var(float(auc_guess), npb, N - npb)))
    return {"budget": N, "delta": delta, "table": table, "best": best}
