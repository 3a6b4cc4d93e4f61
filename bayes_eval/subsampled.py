"""Measures from subsampled data (seed 004): rows kept with a known probability.

Logs and evaluation sets are thinned: zero-reward / negative rows are kept with a known
probability ``l`` ("If r(a) = 0, reject with probability (1 − l)", 004 §"Policy Value
Estimation"), or each row with its own known inclusion probability ``b_i`` (a labeled
sample of a ``bayes_eval`` session: every labeled item has its inclusion probability ``q``).
Every estimate here reweights each kept row by ``w_i = 1 / b_i`` — the seed's
``w(l, r) = l⁻¹ 1[r = 0] + 1[r ≠ 0]`` (004 §"Regression") when only the zeros are thinned —
and reuses the package's estimators:

* **Every measure of the catalogue** (:mod:`bayes_eval.measures`: F1, precision, recall,
  accuracy, PR and ROC curves, ... ``G = g(R)``, ``R = E[ℓ]``) by the Horvitz–Thompson
  estimator of 000 eq. 18 with the delta method (:func:`bayes_eval.poisson.ht_estimate`,
  000 eq. 27–29), :func:`measure`.  When the original row count ``N`` is unknown (it usually
  is: 004 "the total zero reward example count is not preserved") ``R`` is the Hájek ratio
  ``Σ w ℓ / Σ w`` — the seed's ratio of two expectations under the subsampled distribution
  (004 §"Regression", the display before "If the regressor ..."), whose denominator is the
  effective size η = Σ w (004 §"Policy Value Estimation") — handled as the measure
  ``g'(R') = g(R'_{1..d} / R'_{d+1})`` of the augmented loss ``[ℓ, 1]``, so the delta method
  of the same code carries the ratio's variance.  With ``N`` known, the plain HT form
  ``R̂ = (1/N) Σ w ℓ`` (unbiased).

**Two targets** (``target=``):

* ``"data"`` (default) — the value on the full data before subsampling.  Only the
  subsampling is random: the Poisson-sampling (design) covariance
  ``Σ w (w − 1) ℓ ℓᵀ`` of :func:`bayes_eval.poisson.ht_covariance` (000 eq. 28), zero
  when nothing was thinned.  This is what the tests check against "full-data truth".
* ``"population"`` — the value on the distribution the full data were drawn from: the rows
  are i.i.d. draws with importance weights ``w``, covariance ``(1/n²) Σ w² u uᵀ`` of
  :func:`bayes_eval.estimators.is_estimate_draws` (the sampling of the full data plus the
  subsampling).

Intervals are marginal normal (CLT) intervals, clipped to [0, 1] for measures in [0, 1];
``interval_kind`` says which.  The AUC (:mod:`bayes_eval.subsampled_auc`), calibration
(:mod:`bayes_eval.subsampled_calibration`) and policy value
(:mod:`bayes_eval.subsampled_policy`) live beside this module and use its helpers.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401  (float64)
from . import estimators as E
from . import measures as M
from . import poisson as P
from .errors import PoolError, UsageError

__all__ = [
    "TARGETS",
    "MEASURES",
    "SubsampledEstimate",
    "check_finite",
    "check_binary",
    "check_n_total",
    "inclusion_probabilities",
    "kish_n",
    "as_json",
    "ht_core",
    "informative_rows",
    "padded",
    "MIN_INFORMATIVE",
    "ht_rows",
    "measure",
    "f1",
    "precision",
    "recall",
    "accuracy",
    "pr_curve",
    "roc_curve",
]

TARGETS = ("data", "population")
#: the measure names of ``bayes-eval subsampled --measure`` (and of this package's API)
MEASURES = ("auc", "f1", "precision", "recall", "accuracy", "pr_curve", "roc_curve", "calibration",
            "policy-value")


class SubsampledEstimate(NamedTuple):
    """An estimate from subsampled rows.

    ``estimate`` (m,), ``interval`` = (lo (m,), hi (m,)), ``variance`` (m,) of the estimate,
    ``names`` its m component names; ``n_rows`` the rows given (kept), ``effective_n`` the
    seed's effective size η = Σ w (004 §"Policy Value Estimation": the estimated number of
    rows before subsampling); ``extra`` anything else a measure reports (thresholds,
    control points, the other form of an estimator, the Kish size (Σ w)² / Σ w²)."""

    measure: str
    estimate: np.ndarray
    interval: tuple
    interval_kind: str
    n_rows: int
    effective_n: float
    names: tuple
    variance: np.ndarray
    extra: dict

    def as_dict(self) -> dict:
        """The JSON record: ``{"measure", "estimate", "interval": [lo, hi], "interval_kind",
        "n_rows", "effective_n"}`` (curves and control points: arrays per threshold / bin),
        then ``names``, ``variance`` and ``extra``; NaN becomes ``None``."""
        scalar = len(self.estimate) == 1 and not self.extra.get("curve", False)

        def out(a):
            a = np.asarray(a, float)
            v = [None if not np.isfinite(x) else float(x) for x in np.ravel(a)]
            return v[0] if scalar else v

        d = {"measure": self.measure, "estimate": out(self.estimate),
             "interval": [out(self.interval[0]), out(self.interval[1])],
             "interval_kind": self.interval_kind, "n_rows": int(self.n_rows),
             "effective_n": float(self.effective_n), "names": list(self.names),
             "variance": out(self.variance)}
        for k, v in self.extra.items():
            if k == "curve":
                continue
            d[k] = as_json(v)
        return d


def as_json(v):
    """``v`` with arrays as lists and NaN / inf as ``None`` (JSON)."""
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [as_json(x) for x in v]
    if isinstance(v, (np.ndarray, jnp.ndarray)):
        return as_json(np.asarray(v).tolist())
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if np.isfinite(v) else None
    return v


# --------------------------------------------------------------------------------------
# input checks: PoolError naming the column and the row
# --------------------------------------------------------------------------------------
#: what a label / pred column of this module may hold (the errors say it)
BINARY_VALUES = "0/1 or true/false: the measures of subsampled data are binary, not of several classes"


def _floats(x, column: str, expected: str) -> np.ndarray:
    """``x`` as float64; a value that is not a number raises :class:`PoolError` naming the
    column, its row and ``expected`` (one parser, element by element only to find the row)."""
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):   # value by value, to name the first that is not a number
        vals = np.asarray(x, dtype=object)
        out = np.empty(vals.size)
        for i, v in enumerate(vals.reshape(-1)):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                raise PoolError(f"column {column!r}, row {i}: {v!r} is not {expected}") from None
        return out.reshape(vals.shape)


def check_finite(x, column: str) -> np.ndarray:
    """``x`` as float64, or :class:`PoolError` naming ``column`` and the first row that is
    not a number, NaN or infinite."""
    a = _floats(x, column, "a number")
    bad = ~np.isfinite(a)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PoolError(f"column {column!r}, row {i}: {float(a[i])!r} is not a finite number")
    return a


def check_n_total(n_total, n_rows: int, rows: str = "rows") -> None:
    """:class:`PoolError` unless ``n_total`` (the row count before subsampling) is None or a
    finite number at least the ``n_rows`` rows given; the command line's message names
    ``--n-total``.  Checked before anything is computed."""
    if n_total is not None and (not np.isfinite(n_total) or n_total < n_rows):
        raise PoolError(f"n_total = {n_total!r} must be at least the number of {rows} given ({n_rows})",
                        cli=f"--n-total {n_total:g} must be at least the number of {rows} given ({n_rows}): it is "
                            f"the row count before subsampling (leave it out when unknown)")


def check_binary(y, column: str = "label") -> np.ndarray:
    """0/1 labels as int (``true`` / ``false`` read as 1 / 0, any case), or :class:`PoolError`
    naming the column and row and what is accepted (:data:`BINARY_VALUES`)."""
    v = np.asarray(y)
    if v.dtype.kind in "OUS" or str(v.dtype) == "str":   # text: true/false as JSON reads them
        v = np.array([{"true": 1, "false": 0}.get(x.strip().lower(), x) if isinstance(x, str) else x
                      for x in v.astype(object).reshape(-1)], dtype=object).reshape(v.shape)
    a = _floats(v, column, f"a binary label; give {BINARY_VALUES}")
    bad = (a != 0) & (a != 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PoolError(f"column {column!r}, row {i}: {float(a[i])!r} is not a label in {{0, 1}}; give "
                        f"{BINARY_VALUES}")
    return a.astype(np.int64)


def _check_prob(b, column: str) -> np.ndarray:
    b = check_finite(b, column)
    bad = (b <= 0) | (b > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PoolError(f"column {column!r}, row {i}: keep probability {float(b[i])!r} is outside (0, 1]")
    return b


def inclusion_probabilities(positive, keep_rate=None, keep_prob=None, *,
                            rate_column: str = "--keep-rate", prob_column: str = "keep_prob") -> np.ndarray:
    """Each kept row's inclusion probability ``b_i`` (its weight is ``1 / b_i``).

    ``keep_rate`` (004's ``l``): negatives (zero-reward rows, ``positive`` False) were kept
    with probability ``l``, positives always — a number, or per row (the seed's log records
    ``l`` with each row), in which case a positive row must carry ``l = 1``.
    ``keep_prob``: every row's own inclusion probability (a session sample's ``q``).
    Neither: nothing was thinned (``b = 1``, the unweighted estimators).  Bad values raise
    :class:`PoolError` naming ``rate_column`` / ``prob_column`` and the row.
    """
    pos = np.asarray(positive, bool)
    if keep_rate is not None and keep_prob is not None:
        raise UsageError("give the keep rate of the negatives or per-row keep probabilities, not both")
    if keep_prob is not None:
        b = _check_prob(np.broadcast_to(np.asarray(keep_prob, float), pos.shape), prob_column)
        return np.array(b, float)
    if keep_rate is None:
        return np.ones(pos.shape)
    lr = np.asarray(keep_rate, float)
    if lr.ndim == 0:
        if not np.isfinite(lr) or lr <= 0 or lr > 1:
            raise PoolError(f"{rate_column} = {float(lr)!r}: a keep rate must be in (0, 1]")
        return np.where(pos, 1.0, float(lr))
    lr = _check_prob(lr, rate_column)
    bad = pos & (lr < 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PoolError(f"column {rate_column!r}, row {i}: a positive row has keep rate {float(lr[i])!r} < 1, but a "
                        f"keep rate thins only the negatives (zero-reward rows); for rows kept with their own "
                        f"probability use keep_prob (--keep-prob COLUMN)")
    return np.where(pos, 1.0, lr)


def kish_n(w) -> float:
    """Kish's effective sample size (Σ w)² / Σ w²."""
    w = np.asarray(w, float)
    return float(w.sum() ** 2 / max((w * w).sum(), 1e-300))


# --------------------------------------------------------------------------------------
# the HT / Hájek core (jit- and vmap-compatible)
# --------------------------------------------------------------------------------------
def _hajek_g(g: Callable) -> Callable:
    return lambda Ra: jnp.atleast_1d(g(Ra[:-1] / Ra[-1]))


def ht_core(g: Callable, rows, b, sampled=None, *, target: str = "data", n_total=None):
    """``(value (m,), variance (m,))`` of ``G = g(R)`` from rows kept with inclusion
    probabilities ``b`` — jit/vmap-compatible (``sampled`` (n,) masks a subset of the rows,
    what the coverage studies vmap over).

    ``n_total=None``: the Hájek ratio ``R̂ = Σ w ℓ / Σ w`` (η = Σ w, 004 §"Policy Value
    Estimation") as the measure ``g(R'_{:d} / R'_d)`` of ``[ℓ, 1]``; else the HT form
    ``R̂ = Σ w ℓ / N`` (000 eq. 18).  ``target="data"``: :func:`bayes_eval.poisson.ht_estimate`
    (000 eq. 27–29, the subsampling only); ``"population"``:
    :func:`bayes_eval.estimators.is_estimate` with every row's own squared weight.
    """
    if target not in TARGETS:
        raise UsageError(f"target must be one of {TARGETS}, got {target!r}")
    L = jnp.atleast_2d(jnp.asarray(rows, jnp.float64))
    if L.shape[0] != np.shape(b)[0]:
        L = L.T if L.shape[1] == np.shape(b)[0] else L
    b = jnp.asarray(b, jnp.float64)
    s = jnp.ones(b.shape, bool) if sampled is None else jnp.asarray(sampled, bool)
    if n_total is None:
        L = jnp.concatenate([L, jnp.ones((L.shape[0], 1))], axis=1)
        gg = _hajek_g(g)
        scale = 1.0
    else:
        gg = lambda R: jnp.atleast_1d(g(R))  # noqa: E731
        scale = 1.0 / jnp.asarray(n_total, jnp.float64)
    if target == "data":
        p = jnp.full(b.shape, scale)
        est = P.ht_estimate(gg, L, p, b, s)
        return est.value, jnp.diagonal(jnp.atleast_2d(est.covariance))
    w = jnp.where(s, 1.0 / b, 0.0)
    n = jnp.sum(s) if n_total is None else jnp.asarray(n_total, jnp.float64)
    est = E.is_estimate(gg, L, w, None, n, w2sum=w * w)
    return est.value, est.var


#: fewest kept thinned rows that carry the variance (:func:`informative_rows`) for ``clt_ok``
MIN_INFORMATIVE = 10


def informative_rows(g: Callable, rows, b) -> int:
    """How many kept rows with ``b < 1`` have a nonzero linearized contribution
    ``u = Dg'(R̂) [ℓ, 1]`` — the rows the design variance rests on.  Few of them (a rare
    pattern such as the false positives of a precise classifier) and the CLT interval is
    unreliable; none and it is a point, though the full data may hold up to ~3/l such rows
    that happened not to be kept (the rule of three): ``clt_ok`` is False below
    :data:`MIN_INFORMATIVE`.  (Where the measure does not depend on the thinned rows at all,
    e.g. recall under a negative keep rate, the point is exact and ``clt_ok`` False is
    merely cautious.)"""
    L = np.atleast_2d(np.asarray(rows, float))
    b = np.asarray(b, float)
    w = 1.0 / b
    La = np.concatenate([L, np.ones((L.shape[0], 1))], axis=1)
    Ra = jnp.asarray(w @ La / w.sum())
    J = np.asarray(jax.jacfwd(_hajek_g(g))(Ra))  # (m, d + 1)
    u = La @ J.T
    scale = float(np.nanmax(np.abs(J))) * float(np.abs(La).max()) if np.isfinite(J).any() else 0.0
    nz = np.any(np.abs(u) > 1e-9 * max(scale, 1e-300), axis=1)
    return int(np.sum(nz & (b < 1)))


def padded(rows, b):
    """Rows, b and the sampled mask padded to the next power of two with unsampled rows
    (they enter no sum): JAX then compiles once per size class, not once per row count."""
    L = np.atleast_2d(np.asarray(rows, float))
    if L.shape[0] != len(b):
        L = L.T
    n = L.shape[0]
    size = 1 << max(int(np.ceil(np.log2(max(n, 1)))), 4)
    Lp = np.zeros((size, L.shape[1]))
    Lp[:n] = L
    bp = np.ones(size)
    bp[:n] = b
    s = np.zeros(size, bool)
    s[:n] = True
    return Lp, bp, s


def ht_rows(name: str, g: Callable, rows, b, *, target: str = "data", n_total=None, level: float = 0.95,
            names=None, clip=(0.0, 1.0), extra=None, kind: str | None = None) -> SubsampledEstimate:
    """:func:`ht_core` on concrete rows, with its normal interval and the record."""
    b = np.asarray(b, float)
    check_n_total(n_total, len(b))
    value, var = ht_core(g, *padded(rows, b), target=target, n_total=n_total)
    value = np.asarray(value, float)
    var = np.asarray(var, float)
    lo, hi = P.normal_interval(value, var, alpha=1.0 - level, clip=clip)
    w = 1.0 / b
    form = "hajek" if n_total is None else "ht"
    kind = kind or f"clt-{form}-delta-{target}"
    n_inf = informative_rows(g, rows, b)
    ex = {"kish_n": kish_n(w), "target": target, "level": level, "n_informative": n_inf,
          "clt_ok": bool(n_inf >= MIN_INFORMATIVE)}
    ex.update(extra or {})
    if names is None or len(names) != len(value):
        names = (name,) if len(value) == 1 else tuple(f"{name}[{i}]" for i in range(len(value)))
    return SubsampledEstimate(name, value, (np.asarray(lo), np.asarray(hi)), kind, len(b), float(w.sum()),
                              tuple(names), var, ex)


# --------------------------------------------------------------------------------------
# every measure of the catalogue
# --------------------------------------------------------------------------------------
def _loss_at_label(m: M.Measure, preds, scores, labels) -> jnp.ndarray:
    feats = M.features_from_arrays(np.asarray(preds), None if scores is None else np.asarray(scores, float))
    loss = m.loss(feats)  # (n, C, d)
    y = jnp.asarray(labels, jnp.int32)
    return jnp.take_along_axis(loss, y[:, None, None], axis=1)[:, 0, :]


def measure(m: M.Measure, labels, preds=None, scores=None, *, keep_rate=None, keep_prob=None, n_total=None,
            target: str = "data", level: float = 0.95, name: str | None = None) -> SubsampledEstimate:
    """Any catalogue measure ``m`` (:mod:`bayes_eval.measures`) from subsampled rows (module
    docstring; 004 with 000 eq. 18, 27–29).  ``labels`` 0/1 of the kept rows, ``preds`` their
    predicted labels, ``scores`` their scores (curves); ``keep_rate`` / ``keep_prob`` as in
    :func:`inclusion_probabilities`; ``n_total`` the row count before subsampling when known
    (the unbiased HT form); ``target`` ``"data"`` or ``"population"``."""
    y = check_binary(labels, "label")
    check_n_total(n_total, len(y))
    if preds is None and scores is None:
        raise UsageError("give preds (the predicted labels) or scores")
    if scores is not None:
        scores = check_finite(scores, "score")
    if preds is None:
        preds = (scores >= 0).astype(np.int64)
    preds = check_binary(preds, "pred")
    if not (len(y) == len(preds) and (scores is None or len(scores) == len(y))):
        raise PoolError(f"columns have different lengths: label {len(y)}, pred {len(preds)}"
                        + ("" if scores is None else f", score {len(scores)}"))
    if len(y) == 0:
        raise PoolError("no rows")
    b = inclusion_probabilities(y == 1, keep_rate, keep_prob)
    rows = _loss_at_label(m, preds, scores, y)
    curve = m.name.startswith(("pr_curve", "roc_curve"))
    return ht_rows(name or m.name, m.g, rows, b, target=target, n_total=n_total, level=level, names=m.names,
                   extra={"curve": curve})


def f1(labels, preds, **kw) -> SubsampledEstimate:
    """F1 from subsampled rows (:func:`measure` with :func:`bayes_eval.measures.f1`)."""
    return measure(M.f1(), labels, preds, **kw, name="f1")


def precision(labels, preds, **kw) -> SubsampledEstimate:
    """Precision from subsampled rows (:func:`measure`)."""
    return measure(M.precision(), labels, preds, **kw, name="precision")


def recall(labels, preds, **kw) -> SubsampledEstimate:
    """Recall from subsampled rows (:func:`measure`)."""
    return measure(M.recall(), labels, preds, **kw, name="recall")


def accuracy(labels, preds, **kw) -> SubsampledEstimate:
    """Accuracy from subsampled rows (:func:`measure`); needs the Hájek ratio or ``n_total``
    (its g reads R as a normalized expectation)."""
    return measure(M.accuracy(), labels, preds, **kw, name="accuracy")


def _curve(kind, labels, scores, thresholds, n_thresholds, **kw):
    s = check_finite(scores, "score")
    if thresholds is None:
        thresholds = np.unique(M.default_thresholds(s, n_thresholds))
    m = M.pr_curve(thresholds) if kind == "pr_curve" else M.roc_curve(thresholds)
    est = measure(m, labels, (s >= 0).astype(np.int64), s, **kw, name=kind)
    est.extra["thresholds"] = np.asarray(thresholds, float)
    return est


def pr_curve(labels, scores, thresholds=None, n_thresholds: int = 50, **kw) -> SubsampledEstimate:
    """Precision (first half) and recall (second half) at each threshold
    (:func:`bayes_eval.measures.pr_curve`, 001 Ex. 1) from subsampled rows; thresholds
    default to ``n_thresholds`` quantiles of the kept scores."""
    return _curve("pr_curve", labels, scores, thresholds, n_thresholds, **kw)


def roc_curve(labels, scores, thresholds=None, n_thresholds: int = 50, **kw) -> SubsampledEstimate:
    """TPR (first half) and FPR (second half) at each threshold from subsampled rows."""
    return _curve("roc_curve", labels, scores, thresholds, n_thresholds, **kw)
