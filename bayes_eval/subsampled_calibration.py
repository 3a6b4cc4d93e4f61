"""Calibration from data whose zero-reward rows were subsampled (004 §"Regression").

**Control points** (the seed's construction): J bins ``b_{j−1} ≤ φ(x) < b_j`` holding equal
numbers of rows — here equal *weighted* numbers, i.e. equal estimated counts of the data
before thinning (weighted quantiles of the raw score) — and in each bin the weighted means

    φ̂_j = Σ w φ 1_j / Σ w 1_j,     r̂_j = Σ w r 1_j / Σ w 1_j,     w = l⁻¹ 1[r = 0] + 1[r ≠ 0]

("treating any example with r_i = 0 as equivalent to 1/l examples"); ``weighted=False``
gives the unweighted control points (``w = 1``), which are biased on thinned data.  The
linear spline ψ runs through ``(min φ, min r)``, the control points and ``(max φ, max r)``
(:func:`apply`).  Each control point is a ratio of HT totals, so its interval comes from the
package's HT/delta-method core (:func:`bayes_eval.subsampled.ht_core`) with the loss rows
``[1_j, φ 1_j, r 1_j]``.

**The seed's observation** — "if you are going to calibrate the estimator anyway, it
doesn't seem to matter if the training data is zero-reward subsampled and importance-
weighting is not used ... the calibration corrects it": a model fitted without weights on
thinned data predicts ``p' = p / (p + l (1 − p))`` instead of ``p``; the *weighted* control
points of a (thinned) calibration sample map ``p'`` back to ``p``, because they average the
reward, not the score.  ``tests/test_subsampled_calibration.py`` checks both halves.

**Expected calibration error** ``ECE = Σ_j W_j |r̂_j − φ̂_j|`` (``W_j`` the bin's share of the
weighted rows) with a delta-method interval through JAX: ``g(R) = Σ_j |R_{r,j} − R_{φ,j}|``
over the Hájek-normalized R.  The absolute value makes the plug-in biased upward and the
CLT poor when a bin is nearly calibrated (the delta method sees a kink at 0): read the
interval as indicative there.  **Squared loss** ``E[(r − φ)²]`` of a regressor from thinned
data: the importance-weighted mean of the seed (its display "squared loss in the original
distribution is proportional to importance-weighted squared loss"), normalized (Hájek), with
its HT interval.
"""
from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from .errors import PoolError, UsageError
from .subsampled import (SubsampledEstimate, check_finite, ht_core, ht_rows, inclusion_probabilities, kish_n)

__all__ = ["ControlPoints", "weighted_edges", "control_points", "apply", "calibration", "squared_loss"]


class ControlPoints(NamedTuple):
    """The seed's control points: per non-empty bin its weighted mean score ``phi``, mean
    reward ``r`` and their intervals, its weighted share ``mass``; ``edges`` (J + 1,) the
    bin edges; ``knots_x`` / ``knots_y`` the spline ψ with the end points."""

    edges: np.ndarray
    phi: np.ndarray
    r: np.ndarray
    phi_lo: np.ndarray
    phi_hi: np.ndarray
    r_lo: np.ndarray
    r_hi: np.ndarray
    mass: np.ndarray
    count: np.ndarray
    knots_x: np.ndarray
    knots_y: np.ndarray


def weighted_edges(scores, w, bins: int) -> np.ndarray:
    """Edges of ``bins`` bins of equal weighted count (weighted quantiles of the scores);
    the first and last edge are the smallest and largest score."""
    s = np.asarray(scores, float)
    order = np.argsort(s, kind="stable")
    cw = np.cumsum(np.asarray(w, float)[order])
    cw = cw / cw[-1]
    qs = np.arange(1, bins) / bins
    inner = s[order][np.minimum(np.searchsorted(cw, qs, side="left"), len(s) - 1)]
    return np.concatenate([[s.min()], inner, [s.max()]])


def _bin_of(s, edges):
    return np.clip(np.searchsorted(edges[1:-1], s, side="right"), 0, len(edges) - 2)


def _setup(scores, rewards, keep_rate, keep_prob):
    s = check_finite(scores, "score")
    r = check_finite(rewards, "label")
    if len(s) != len(r):
        raise PoolError(f"columns have different lengths: score {len(s)}, label {len(r)}")
    if len(s) == 0:
        raise PoolError("no rows")
    b = inclusion_probabilities(r != 0, keep_rate, keep_prob)
    return s, r, b


def _cp_g(J):
    def g(R):
        m, sp, rr = R[:J], R[J:2 * J], R[2 * J:]
        return jnp.concatenate([sp / m, rr / m])
    return g


def control_points(scores, rewards, *, keep_rate=None, keep_prob=None, bins: int = 10, weighted: bool = True,
                   level: float = 0.95, score_range=None, reward_range=None) -> ControlPoints:
    """The seed's control points and spline (module docstring).  ``score_range`` /
    ``reward_range``: the smallest and largest possible score and reward (default: those
    observed)."""
    from scipy.stats import norm

    s, r, b = _setup(scores, rewards, keep_rate, keep_prob)
    outside = (s < 0.0) | (s > 1.0)
    if np.all((r >= 0.0) & (r <= 1.0)) and np.any(outside):
        i = int(np.argmax(outside))
        raise PoolError(f"score {s[i]:g} (row {i}) is outside [0, 1]: calibration compares a predicted "
                        "probability with the observed rate, so margins or ranks must be read as probabilities "
                        "first (bayes_eval.scores.prior_probability, the sigmoid of a margin; "
                        "`bayes-eval subsampled --measure calibration` and subsampled_frame.estimate do it)")
    if int(bins) < 1:
        raise UsageError(f"the number of bins must be at least 1, got {bins!r}")
    w = 1.0 / b if weighted else np.ones_like(b)
    bw = 1.0 / w
    edges = weighted_edges(s, w, int(bins))
    k = _bin_of(s, edges)
    used = np.unique(k)
    J = len(used)
    onehot = (k[:, None] == used[None, :]).astype(float)
    rows = np.concatenate([onehot, onehot * s[:, None], onehot * r[:, None]], axis=1)
    value, var = ht_core(_cp_g(J), rows, bw, target="data")
    value, var = np.asarray(value), np.asarray(var)
    z = float(norm.ppf(0.5 + level / 2.0))
    sd = np.sqrt(np.clip(var, 0.0, None))
    phi, rr = value[:J], value[J:]
    mass = (onehot * w[:, None]).sum(0) / w.sum()
    smin, smax = (s.min(), s.max()) if score_range is None else map(float, score_range)
    rmin, rmax = (r.min(), r.max()) if reward_range is None else map(float, reward_range)
    kx = np.concatenate([[smin], phi, [smax]])
    ky = np.concatenate([[rmin], rr, [rmax]])
    return ControlPoints(edges, phi, rr, phi - z * sd[:J], phi + z * sd[:J], rr - z * sd[J:], rr + z * sd[J:],
                         mass, onehot.sum(0).astype(int), kx, ky)


def apply(cp: ControlPoints, scores) -> np.ndarray:
    """ψ(φ): the linear spline through the control points and end points (004 §"Regression"),
    constant beyond the end points."""
    return np.interp(np.asarray(scores, float), cp.knots_x, cp.knots_y)


def _ece_g(J):
    def g(R):
        sp, rr = R[J:2 * J], R[2 * J:]
        return jnp.atleast_1d(jnp.sum(jnp.abs(rr - sp)))
    return g


def calibration(scores, rewards, *, keep_rate=None, keep_prob=None, bins: int = 10, weighted: bool = True,
                level: float = 0.95) -> SubsampledEstimate:
    """Expected calibration error with its delta-method interval, and the control points in
    ``extra`` (arrays per bin: ``phi``, ``r``, their intervals, ``mass``, ``edges``, the
    spline's knots) — the reliability diagram's data."""
    cp = control_points(scores, rewards, keep_rate=keep_rate, keep_prob=keep_prob, bins=bins, weighted=weighted,
                        level=level)
    s, r, b = _setup(scores, rewards, keep_rate, keep_prob)
    if not weighted:
        b = np.ones_like(b)
    k = _bin_of(s, cp.edges)
    used = np.unique(k)
    J = len(used)
    onehot = (k[:, None] == used[None, :]).astype(float)
    rows = np.concatenate([onehot, onehot * s[:, None], onehot * r[:, None]], axis=1)
    extra = {k2: np.asarray(v) for k2, v in cp._asdict().items()}
    extra["weighted"] = weighted
    est = ht_rows("calibration", _ece_g(J), rows, b, level=level, names=("ece",), clip=(0.0, np.inf),
                  extra=extra, kind="clt-hajek-delta-data (kink at 0: indicative near calibration)")
    return est


def squared_loss(predictions, rewards, *, keep_rate=None, keep_prob=None, n_total=None, target: str = "data",
                 level: float = 0.95) -> SubsampledEstimate:
    """Importance-weighted squared loss ``E[(r − φ(x))²]`` of a regressor from thinned rows
    (004 §"Regression"), Hájek-normalized (or HT with ``n_total``), with its interval."""
    s, r, b = _setup(predictions, rewards, keep_rate, keep_prob)
    rows = ((r - s) ** 2)[:, None]
    return ht_rows("squared_loss", lambda R: R, rows, b, target=target, n_total=n_total, level=level,
                   clip=(0.0, np.inf), extra={"kish_n": kish_n(1.0 / b)})
