"""Generalized performance measures G = g(R), R = E_p[ℓ(x, y)].

A generalized measure (001 §2.2, Def. 1) is a vector loss ℓ(x, y) ∈ R^d together with a
map g : R^d → R^m.  The measure of a classifier on a distribution p is G = g(R) with the
vector risk R = E_{(x,y)~p}[ℓ(x, y)].  On a finite pool with item weights p_i (summing to 1)
and labels y_i, R = Σ_i p_i ℓ(x_i, y_i) (001 Remark 2).

Everything here is plain ``jax.numpy``: ``g`` is jit/vmap-compatible and its Jacobian Dg comes
from :func:`jax.jacfwd` (see :func:`jacobian`), so any user-defined g works without hand
derivatives.

A :class:`Measure` evaluates its loss for *every* class y at once — ``loss(features)`` has
shape ``(n, C, d)`` — because samplers need ℓ(x, y) for labels they have not seen yet (001
Prop. 2 weighs ‖Dg ℓ(x, y)‖ by the oracle's p(y | x)).

Built-ins follow 001 Table 1 (accuracy, balanced accuracy, precision, recall, F-beta, MCC,
Fowlkes–Mallows, Brier), 001 Ex. 1 (PR curve; ROC curve and AUC on the same loss), and
000 App. D (multi-class micro / macro F1).  :func:`stack` concatenates measures — several
measures, or one measure for several systems — into one vector measure.

Conventions
-----------
* Binary measures use classes {0, 1}; 1 is the positive class.  A system's prediction is
  "positive" iff its predicted label equals 1.
* Ratios are divided as they are: a zero denominator gives ``nan`` (or ``inf``); nothing is
  hidden.
* The g's of 001 Table 1 use that R is an expectation under a *normalized* distribution
  (e.g. the negative rate is written 1 − R_y).  :func:`risk` normalizes the weights.
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401  (float64)
from .checks import as_2d, check_labels

__all__ = [
    "Features",
    "Measure",
    "features_from_arrays",
    "jacobian",
    "risk",
    "value",
    "default_thresholds",
    "accuracy",
    "balanced_accuracy",
    "precision",
    "recall",
    "f_beta",
    "f1",
    "mcc",
    "fowlkes_mallows",
    "brier",
    "pr_curve",
    "roc_curve",
    "auc",
    "macro_f1",
    "micro_f1",
    "stack",
    "get",
    "MEASURE_NAMES",
    "takes_n_classes",
]

_F64 = jnp.float64


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------
class Features(NamedTuple):
    """What a measure may look at for n items, S systems and C classes.

    Attributes
    ----------
    preds : jax.Array, shape (n, S), int
        Each system's predicted label.
    scores : jax.Array, shape (n, S), float64
        Each system's real-valued score (larger = more confident in the positive class).
    probs : jax.Array, shape (n, S, C), float64
        Each system's probability of each class.
    """

    preds: jax.Array
    scores: jax.Array
    probs: jax.Array


class Measure(NamedTuple):
    """A generalized measure G = g(R), R = E_p[ℓ(x, y)] (001 §2.2, Def. 1).

    Attributes
    ----------
    name : str
        Short name, e.g. ``"f1"``.
    loss : callable
        ``loss(features) -> (n, C, d)`` float64: ℓ(x_i, y) for every item i and every class
        y in 0..C-1.  Written in ``jax.numpy`` (jit-compatible).
    g : callable
        ``g(R) -> (m,)``: maps the risk vector R (shape ``(d,)``) to the m measure
        components; always 1-D.  Written in ``jax.numpy`` (jit / vmap / jacfwd-compatible).
    n_classes : int
        Number of classes C.
    names : tuple of str
        The m component names, e.g. ``("f1",)`` or ``("precision@0.5", ...)``.
    pattern : callable or None
        Optional ``pattern(features) -> (n,) int64`` (numpy) such that items with equal ids
        have identical loss rows ℓ(x, ·) for all classes.  Lets callers compress a large pool
        into cells.  ``None`` when no cheap grouping is known.
    fractional : bool, default False
        Every component of g is linear-fractional in R — (a·R + a₀) / (b·R + b₀), an affine
        g included — as precision, recall, F-β, accuracy, the PR and ROC curves' points,
        micro-F1 and the Brier score are.  Its range over every completion of the pool
        given the labels is then attained at a completion that gives all unlabeled items
        of a cell one class, and Dinkelbach's iteration finds it exactly
        (:func:`bayes_eval.estimators.feasible_range`); the estimate is projected onto that
        range.  False (no projection) for MCC, balanced accuracy, Fowlkes–Mallows, macro-F1,
        AUC and custom measures unless their author says so.
    """

    name: str
    loss: Callable[[Features], jax.Array]
    g: Callable[[jax.Array], jax.Array]
    n_classes: int
    names: tuple[str, ...]
    pattern: Callable[[Features], np.ndarray] | None = None
    fractional: bool = False


# --------------------------------------------------------------------------------------
# Construction of features
# --------------------------------------------------------------------------------------
def _sigmoid(x: np.ndarray) -> np.ndarray:
    # tanh form: numerically stable, no overflow warnings
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def features_from_arrays(preds, scores=None, probs=None, n_classes: int = 2) -> Features:
    """Build :class:`Features` from numpy-like arrays.

    Parameters
    ----------
    preds : array_like, shape (n,) or (n, S)
        Predicted labels in 0..n_classes-1 (integers; integral floats and bools accepted).
    scores : array_like, shape (n,) or (n, S), optional
        Real-valued scores (larger = more positive).  Default: ``preds`` as float.
    probs : array_like, optional
        Class probabilities.  Accepted shapes: ``(n, S, C)``; ``(n, C)`` when ``preds`` is
        1-D; for binary problems also the positive-class probability alone, with the same
        shape as ``preds``.  Default: for binary problems p̂₁ = sigmoid(score) (as 001 §5.2
        does for SVM scores); for multi-class problems the one-hot encoding of ``preds``.
    n_classes : int, default 2
        Number of classes C.

    Returns
    -------
    Features
        ``preds`` (n, S) int64, ``scores`` (n, S) float64, ``probs`` (n, S, C) float64.

    Raises
    ------
    ValueError
        On inconsistent shapes, non-integral predictions or predictions outside
        0..n_classes-1: a :class:`~bayes_eval.errors.PoolError` from the pool's own column
        checks (:mod:`bayes_eval.checks`), whose message names the first offending row.
    """
    n_classes = int(n_classes)
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2; got {n_classes}")
    # the pool's own column checks (bayes_eval.checks): same rules, same messages
    preds_in = np.asarray(preds)
    p = as_2d("preds", preds_in)
    n, S = p.shape
    rows = np.arange(n)
    p = check_labels("preds", p, n_classes, rows).astype(np.int64)

    if scores is None:
        s = p.astype(np.float64)
    else:
        s = as_2d("scores", np.asarray(scores, dtype=np.float64), n)
        if s.shape != (n, S):
            raise ValueError(f"scores must have shape {(n, S)} like preds; got {s.shape}")

    if probs is None:
        if n_classes == 2:
            p1 = _sigmoid(s)
            pr = np.stack([1.0 - p1, p1], axis=-1)
        else:
            pr = np.eye(n_classes, dtype=np.float64)[p]
    else:
        pr = np.asarray(probs, dtype=np.float64)
        if pr.ndim == preds_in.ndim and n_classes == 2:
            p1 = as_2d("probs", pr, n)
            pr = np.stack([1.0 - p1, p1], axis=-1)
        elif pr.ndim == preds_in.ndim + 1:
            if preds_in.ndim == 1:
                pr = pr[:, None, :]
        else:
            raise ValueError(
                f"probs shape {pr.shape} does not fit preds shape {preds_in.shape} "
                f"and n_classes={n_classes}"
            )
        if pr.shape != (n, S, n_classes):
            raise ValueError(f"probs must have shape {(n, S, n_classes)}; got {pr.shape}")

    return Features(
        preds=jnp.asarray(p, dtype=jnp.int64),
        scores=jnp.asarray(s, dtype=_F64),
        probs=jnp.asarray(pr, dtype=_F64),
    )


# --------------------------------------------------------------------------------------
# Evaluation helpers
# --------------------------------------------------------------------------------------
def _g_1d(measure: Measure) -> Callable[[jax.Array], jax.Array]:
    return lambda R: jnp.atleast_1d(measure.g(R))


def jacobian(measure: Measure, R) -> jax.Array:
    """Jacobian Dg(R) of the measure's map g, by forward-mode autodiff.

    Parameters
    ----------
    measure : Measure
    R : array_like, shape (d,)
        Point at which to differentiate (001 Def. 1 requires g differentiable at R; the delta
        method of 001 §3.3.2 uses Dg(R)).

    Returns
    -------
    jax.Array, shape (m, d)
    """
    R = jnp.asarray(R, dtype=_F64)
    if _hashable(measure):
        return _jacobian_jit(measure, R)
    return _jacobian_impl(measure, R)


def _hashable(measure: Measure) -> bool:
    try:
        hash(measure)
    except TypeError:
        return False
    return True


def _jacobian_impl(measure: Measure, R: jax.Array) -> jax.Array:
    return jax.jacfwd(_g_1d(measure))(R)


# One compiled program per measure instead of many small eager ops (much faster on first use).
_jacobian_jit = jax.jit(_jacobian_impl, static_argnums=0)


def _check_labels(labels, n: int, n_classes: int) -> None:
    try:
        lab = np.asarray(labels)
    except jax.errors.TracerArrayConversionError:  # inside jit: shapes only
        return
    if lab.shape != (n,):
        raise ValueError(f"labels must have shape ({n},); got {lab.shape}")
    if lab.size and not np.issubdtype(lab.dtype, np.integer) and lab.dtype != bool:
        bad = lab != np.round(lab)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(f"labels must be integers; row {row} has {lab[row]}")
    bad = (lab < 0) | (lab >= n_classes)
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(f"labels must lie in 0..{n_classes - 1}; row {row} has {lab[row]}")


def risk(measure: Measure, features: Features, labels, weights=None) -> jax.Array:
    """Vector risk R = Σ_i p_i ℓ(x_i, y_i) on a fully labeled pool (001 Remark 2).

    Parameters
    ----------
    measure : Measure
    features : Features
        Features of the n items.
    labels : array_like, shape (n,), int
        True labels in 0..C-1.
    weights : array_like, shape (n,), optional
        Non-negative item weights p_i; normalized to sum to 1.  Default: uniform.

    Returns
    -------
    jax.Array, shape (d,)

    Notes
    -----
    When the measure has a ``pattern`` and the inputs are concrete (not traced), the pool is
    first compressed into cells of equal pattern: the loss is evaluated on one
    representative per cell and weighted by the per-(cell, label) sums of p.  The result is
    the same up to rounding, but memory and time scale with the number of cells rather than
    with n × d (e.g. a PR curve with L = 1024 on a large pool).  Inside ``jax.jit`` the
    direct per-item sum is used.
    """
    if not hasattr(features, "preds"):
        hint = " (a method: call it, `pool.features()`)" if callable(features) else ""
        raise TypeError(f"features must be a Features (preds, scores, probs); got {type(features).__name__}{hint}")
    n = int(np.shape(features.preds)[0])
    _check_labels(labels, n, measure.n_classes)
    if weights is not None and np.shape(weights) != (n,):
        raise ValueError(f"weights must have shape ({n},); got {np.shape(weights)}")
    if measure.pattern is not None and not _traced(features, labels, weights):
        return _risk_cells(measure, features, labels, weights)
    if _hashable(measure):
        return _risk_jit(measure, features, labels, weights)
    return _risk_impl(measure, features, labels, weights)


def _traced(*trees) -> bool:
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(trees))


def _risk_cells(measure: Measure, features: Features, labels, weights) -> jax.Array:
    """R = Σ_cells Σ_y W[cell, y] ℓ(x_cell, y), W the sums of normalized weights."""
    ids = np.asarray(measure.pattern(features)).reshape(-1)
    n = ids.shape[0]
    _, first, inv = np.unique(ids, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    K, C = first.shape[0], measure.n_classes
    lab = np.asarray(labels).astype(np.int64).reshape(-1)
    if weights is None:
        p = np.full(n, 1.0 / n)
    else:
        w = np.asarray(weights, dtype=np.float64)
        p = w / w.sum()
    W = np.bincount(inv * C + lab, weights=p, minlength=K * C).reshape(K, C)
    rep = Features(*(jnp.asarray(np.asarray(a)[first]) for a in features))
    lo = jnp.asarray(measure.loss(rep), dtype=_F64)  # (K, C, d)
    return jnp.einsum("kc,kcd->d", jnp.asarray(W), lo)


def _risk_impl(measure: Measure, features: Features, labels, weights) -> jax.Array:
    lo = jnp.asarray(measure.loss(features), dtype=_F64)  # (n, C, d)
    lab = jnp.asarray(labels).astype(jnp.int32)
    rows = jnp.take_along_axis(lo, lab[:, None, None], axis=1)[:, 0, :]  # (n, d)
    if weights is None:
        return jnp.mean(rows, axis=0)
    w = jnp.asarray(weights, dtype=_F64)
    return (w / jnp.sum(w)) @ rows


_risk_jit = jax.jit(_risk_impl, static_argnums=0)


def value(measure: Measure, features: Features, labels, weights=None) -> jax.Array:
    """Measure value G = g(R) computed directly on a fully labeled pool.

    Parameters
    ----------
    measure, features, labels, weights
        As for :func:`risk`.

    Returns
    -------
    jax.Array, shape (m,)
    """
    R = risk(measure, features, labels, weights)
    if _hashable(measure):
        return _g_jit(measure, R)
    return _g_1d(measure)(R)


def _g_impl(measure: Measure, R: jax.Array) -> jax.Array:
    return _g_1d(measure)(R)


_g_jit = jax.jit(_g_impl, static_argnums=0)


def default_thresholds(scores, L: int = 1024, spacing: str = "quantile") -> np.ndarray:
    """A grid of L ascending classification thresholds on the scores.

    Parameters
    ----------
    scores : array_like
        Scores of the pool (any shape; flattened).
    L : int, default 1024
        Number of thresholds (001 §5.3 uses L = 2^10 for PR curves).
    spacing : {"quantile", "uniform"}, default "quantile"
        ``"quantile"``: thresholds at evenly spaced quantiles of the scores (from the minimum
        to the maximum score); ``"uniform"``: evenly spaced between the minimum and maximum
        score, as in 001 §5.3.

    Returns
    -------
    numpy.ndarray, shape (L,), float64
        Non-decreasing (quantile thresholds repeat where scores tie).
    """
    s = np.ravel(np.asarray(scores, dtype=np.float64))
    L = int(L)
    if L < 1:
        raise ValueError(f"L must be >= 1; got {L}")
    if s.size == 0:
        raise ValueError("scores is empty")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite")
    if spacing == "quantile":
        return np.quantile(s, np.linspace(0.0, 1.0, L))
    if spacing == "uniform":
        return np.linspace(s.min(), s.max(), L)
    raise ValueError(f"spacing must be 'quantile' or 'uniform'; got {spacing!r}")


# --------------------------------------------------------------------------------------
# Building blocks for the built-ins
# --------------------------------------------------------------------------------------
def _measure(name, loss, g, n_classes, names, pattern, fractional: bool = False) -> Measure:
    """Build a Measure whose loss and g are jitted: called eagerly they run as one compiled
    program (op-by-op dispatch of many small jnp ops is far slower); inside other
    transformations (jit, vmap, jacfwd) they compose as usual."""
    return Measure(name, jax.jit(loss), jax.jit(g), int(n_classes), tuple(names), pattern, bool(fractional))


def _canon(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def _cached(factory):
    """Memoize a factory: equal arguments (after binding defaults) give the *same* Measure,
    so jitted code keyed on the measure (a static argument) is compiled once.  Arguments of
    different types (1 vs True vs 1.0) are distinct keys, so validation still runs."""
    sig = inspect.signature(factory)
    memo = functools.lru_cache(maxsize=256, typed=True)(factory)

    @functools.wraps(factory)
    def wrapper(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        key = tuple(_canon(v) for v in bound.arguments.values())
        try:
            hash(key)
        except TypeError:
            return factory(*args, **kwargs)
        return memo(*key)

    return wrapper

def _check_system(system) -> int:
    if isinstance(system, bool) or not isinstance(system, (int, np.integer)) or system < 0:
        raise ValueError(f"system must be a non-negative int; got {system!r}")
    return int(system)


def _check_n_classes(n_classes) -> int:
    if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)):
        raise ValueError(f"n_classes must be an int; got {n_classes!r}")
    if n_classes < 2:
        raise ValueError(f"n_classes must be >= 2; got {n_classes}")
    return int(n_classes)


def _suffix(system: int) -> str:
    return "" if system == 0 else f"[s{system}]"


def _named(base: str, system: int) -> tuple[str, tuple[str, ...]]:
    nm = base + _suffix(system)
    return nm, (nm,)


def _pos_pred(features: Features, system: int) -> jax.Array:
    """(n,) float64: 1 where the system predicts the positive class 1."""
    return (jnp.asarray(features.preds)[:, system] == 1).astype(_F64)


def _binary_pred_loss(components: Callable, system: int) -> Callable[[Features], jax.Array]:
    """Loss (n, 2, d) from ``components(y, f) -> list of d arrays`` broadcastable to (n, 2),
    where y = [[0., 1.]] (1, 2) and f (n, 1) is the 0/1 positive prediction."""

    def loss(features: Features) -> jax.Array:
        f = _pos_pred(features, system)[:, None]
        y = jnp.arange(2, dtype=_F64)[None, :]
        shape = (f.shape[0], 2)
        return jnp.stack([jnp.broadcast_to(c, shape) for c in components(y, f)], axis=-1)

    return loss


def _binary_pred_pattern(system: int) -> Callable[[Features], np.ndarray]:
    def pattern(features: Features) -> np.ndarray:
        return (np.asarray(features.preds)[:, system] == 1).astype(np.int64)

    return pattern


def _pred_pattern(system: int) -> Callable[[Features], np.ndarray]:
    def pattern(features: Features) -> np.ndarray:
        return np.asarray(features.preds)[:, system].astype(np.int64)

    return pattern


def _confusion_loss(system: int) -> Callable[[Features], jax.Array]:
    """ℓ = [y f(x), y, f(x)] (001 Table 1, rows BA / MCC / FM)."""
    return _binary_pred_loss(lambda y, f: [y * f, y, f], system)


# --------------------------------------------------------------------------------------
# Built-in measures, 001 Table 1
# --------------------------------------------------------------------------------------
@_cached
def accuracy(system: int = 0, n_classes: int = 2) -> Measure:
    """Accuracy: ℓ = 1{y ≠ f(x)}, g(R) = 1 − R (001 Table 1).

    Parameters
    ----------
    system : int, default 0
        Which system's predictions.
    n_classes : int, default 2
        Number of classes; the loss is the 0/1 error for any C.

    Returns
    -------
    Measure
    """
    system = _check_system(system)
    C = _check_n_classes(n_classes)

    def loss(features: Features) -> jax.Array:
        f = jnp.asarray(features.preds)[:, system]
        y = jnp.arange(C)
        return (f[:, None] != y[None, :]).astype(_F64)[:, :, None]

    def g(R):
        return 1.0 - R

    name, names = _named("accuracy", system)
    return _measure(name, loss, g, C, names, _pred_pattern(system), fractional=True)


@_cached
def balanced_accuracy(system: int = 0) -> Measure:
    """Balanced accuracy (binary): ℓ = [y f(x), y, f(x)],
    g(R) = (R₁ + R₂(1 − R₂ − R₃)) / (2 R₂ (1 − R₂)) (001 Table 1).

    Equals (TPR + TNR) / 2.

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    system = _check_system(system)

    def g(R):
        return jnp.atleast_1d((R[0] + R[1] * (1.0 - R[1] - R[2])) / (2.0 * R[1] * (1.0 - R[1])))

    name, names = _named("balanced_accuracy", system)
    return _measure(name, _confusion_loss(system), g, 2, names, _binary_pred_pattern(system))


@_cached
def precision(system: int = 0) -> Measure:
    """Precision (binary): ℓ = [y f(x), f(x)], g(R) = R₁ / R₂ (001 Table 1).

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    system = _check_system(system)
    loss = _binary_pred_loss(lambda y, f: [y * f, f], system)

    def g(R):
        return jnp.atleast_1d(R[0] / R[1])

    name, names = _named("precision", system)
    return _measure(name, loss, g, 2, names, _binary_pred_pattern(system), fractional=True)


@_cached
def recall(system: int = 0) -> Measure:
    """Recall (binary): ℓ = [y f(x), y], g(R) = R₁ / R₂ (001 Table 1, Remark 2).

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    system = _check_system(system)
    loss = _binary_pred_loss(lambda y, f: [y * f, y], system)

    def g(R):
        return jnp.atleast_1d(R[0] / R[1])

    name, names = _named("recall", system)
    return _measure(name, loss, g, 2, names, _binary_pred_pattern(system), fractional=True)


def _beta_name(beta: float) -> str:
    return "f" + format(beta, "g")


def f_beta(beta: float, system: int = 0) -> Measure:
    """F-beta score (binary): ℓ = [y f(x), (β² y + f(x)) / (1 + β²)], g(R) = R₁ / R₂
    (001 Table 1).

    Parameters
    ----------
    beta : float
        Positive weight of recall relative to precision.
    system : int, default 0

    Returns
    -------
    Measure
        Named ``"f1"`` for β = 1, ``"f2"``, ``"f0.5"``, ... otherwise.
    """
    beta = float(beta)
    if not (np.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a positive finite number; got {beta}")
    return _f_beta_impl(beta, _check_system(system))


@_cached
def _f_beta_impl(beta: float, system: int) -> Measure:
    b2 = beta * beta
    loss = _binary_pred_loss(lambda y, f: [y * f, (b2 * y + f) / (1.0 + b2)], system)

    def g(R):
        return jnp.atleast_1d(R[0] / R[1])

    name, names = _named(_beta_name(beta), system)
    return _measure(name, loss, g, 2, names, _binary_pred_pattern(system), fractional=True)


@_cached
def f1(system: int = 0) -> Measure:
    """F1 score: :func:`f_beta` with β = 1 (001 Table 1); g(R) = R₁ / R₂ with
    ℓ = [y f(x), (y + f(x)) / 2], so Dg = [1/R₂, −R₁/R₂²].

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    return f_beta(1.0, system)


@_cached
def mcc(system: int = 0) -> Measure:
    """Matthews correlation coefficient (binary): ℓ = [y f(x), y, f(x)],
    g(R) = (R₁ − R₂R₃) / sqrt(R₂ R₃ (1 − R₂)(1 − R₃)) (001 Table 1).

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    system = _check_system(system)

    def g(R):
        num = R[0] - R[1] * R[2]
        den = jnp.sqrt(R[1] * R[2] * (1.0 - R[1]) * (1.0 - R[2]))
        return jnp.atleast_1d(num / den)

    name, names = _named("mcc", system)
    return _measure(name, _confusion_loss(system), g, 2, names, _binary_pred_pattern(system))


@_cached
def fowlkes_mallows(system: int = 0) -> Measure:
    """Fowlkes–Mallows index (binary): ℓ = [y f(x), y, f(x)], g(R) = R₁ / sqrt(R₂ R₃)
    (001 Table 1), i.e. sqrt(precision · recall).

    Parameters
    ----------
    system : int, default 0

    Returns
    -------
    Measure
    """
    system = _check_system(system)

    def g(R):
        return jnp.atleast_1d(R[0] / jnp.sqrt(R[1] * R[2]))

    name, names = _named("fowlkes_mallows", system)
    return _measure(name, _confusion_loss(system), g, 2, names, _binary_pred_pattern(system))


@_cached
def brier(system: int = 0, n_classes: int = 2) -> Measure:
    """Brier score: ℓ = 2 (p̂₁(x) − y)², g(R) = R (001 Table 1).

    For ``n_classes > 2`` the multi-class form ℓ = Σ_c (p̂_c(x) − 1{y = c})² is used; for
    binary problems with p̂₀ = 1 − p̂₁ the two coincide.  The binary value is twice
    scikit-learn's ``brier_score_loss``.

    Parameters
    ----------
    system : int, default 0
    n_classes : int, default 2

    Returns
    -------
    Measure
        ``pattern`` is None (scores are continuous, no cheap grouping).
    """
    system = _check_system(system)
    C = _check_n_classes(n_classes)

    def loss(features: Features) -> jax.Array:
        pr = jnp.asarray(features.probs, dtype=_F64)[:, system, :]  # (n, C)
        if C == 2:
            p1 = pr[:, 1:2]  # (n, 1)
            y = jnp.arange(2, dtype=_F64)[None, :]
            return (2.0 * (p1 - y) ** 2)[:, :, None]
        eye = jnp.eye(C, dtype=_F64)
        return jnp.sum((pr[:, None, :] - eye[None, :, :]) ** 2, axis=-1)[:, :, None]

    def g(R):
        return jnp.atleast_1d(R)

    name, names = _named("brier", system)
    return _measure(name, loss, g, C, names, None, fractional=True)


# --------------------------------------------------------------------------------------
# Curves on a threshold grid, 001 Ex. 1
# --------------------------------------------------------------------------------------
def _check_thresholds(thresholds) -> np.ndarray:
    t = np.asarray(thresholds, dtype=np.float64)
    if t.ndim == 0:
        t = t[None]
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"thresholds must be a non-empty 1-D array; got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("thresholds must be finite")
    return t


def _threshold_labels(t: np.ndarray) -> list[str]:
    for fmt in (".6g", ".17g"):
        labs = [format(float(x), fmt) for x in t]
        if len(set(labs)) == len(labs):
            return labs
    return [f"{float(x):.6g}#{i}" for i, x in enumerate(t)]


def _curve_loss(t: np.ndarray, system: int) -> Callable[[Features], jax.Array]:
    """ℓ = [1{s ≥ τ_1..τ_L}, y·1{s ≥ τ_1..τ_L}, y] (001 Ex. 1); shape (n, 2, 2L + 1)."""
    L = t.size

    def loss(features: Features) -> jax.Array:
        s = jnp.asarray(features.scores, dtype=_F64)[:, system]
        ind = (s[:, None] >= jnp.asarray(t)[None, :]).astype(_F64)  # (n, L)
        n = ind.shape[0]
        ind = jnp.broadcast_to(ind[:, None, :], (n, 2, L))
        y = jnp.arange(2, dtype=_F64)[None, :, None]  # (1, 2, 1)
        return jnp.concatenate([ind, y * ind, jnp.broadcast_to(y, (n, 2, 1))], axis=-1)

    return loss


def _curve_pattern(t: np.ndarray, system: int) -> Callable[[Features], np.ndarray]:
    ts = np.sort(t)

    def pattern(features: Features) -> np.ndarray:
        s = np.asarray(features.scores, dtype=np.float64)[:, system]
        # number of thresholds passed (s >= tau); determines the whole indicator vector
        return np.searchsorted(ts, s, side="right").astype(np.int64)

    return pattern


def pr_curve(thresholds, system: int = 0) -> Measure:
    """Precision–recall curve on a threshold grid (001 Ex. 1).

    ℓ = [1{s(x) ≥ τ_1}, …, 1{s(x) ≥ τ_L}, y 1{s(x) ≥ τ_1}, …, y 1{s(x) ≥ τ_L}, y] (d = 2L + 1)
    on the system's *score*, and
    g(R) = [R_{L+1}/R_1, …, R_{2L}/R_L, R_{L+1}/R_{2L+1}, …, R_{2L}/R_{2L+1}]:
    precision at each threshold, then recall at each threshold.

    Parameters
    ----------
    thresholds : array_like, shape (L,)
        Thresholds τ (ascending in 001; any order is accepted and kept).
        See :func:`default_thresholds`.
    system : int, default 0

    Returns
    -------
    Measure
        m = 2L components named ``"precision@τ"`` and ``"recall@τ"``.  Precision at a
        threshold above every score is 0/0 = nan.
    """
    t = _check_thresholds(thresholds)
    return _pr_curve_impl(tuple(t.tolist()), _check_system(system))


@_cached
def _pr_curve_impl(t_key: tuple, system: int) -> Measure:
    t = np.asarray(t_key, dtype=np.float64)
    L = t.size

    def g(R):
        tp = R[L : 2 * L]
        return jnp.concatenate([tp / R[:L], tp / R[2 * L]])

    labs = _threshold_labels(t)
    sfx = _suffix(system)
    names = tuple(f"precision@{x}{sfx}" for x in labs) + tuple(f"recall@{x}{sfx}" for x in labs)
    return _measure(
        "pr_curve" + sfx, _curve_loss(t, system), g, 2, names, _curve_pattern(t, system), fractional=True
    )


def roc_curve(thresholds, system: int = 0) -> Measure:
    """ROC curve (TPR and FPR) on a threshold grid.

    Uses the loss of 001 Ex. 1 (d = 2L + 1, see :func:`pr_curve`), with
    g(R) = [TPR_1..L, FPR_1..L], TPR_l = R_{L+l} / R_{2L+1} and
    FPR_l = (R_l − R_{L+l}) / (1 − R_{2L+1}).

    Parameters
    ----------
    thresholds : array_like, shape (L,)
    system : int, default 0

    Returns
    -------
    Measure
        m = 2L components named ``"tpr@τ"`` and ``"fpr@τ"``.
    """
    t = _check_thresholds(thresholds)
    return _roc_curve_impl(tuple(t.tolist()), _check_system(system))


@_cached
def _roc_curve_impl(t_key: tuple, system: int) -> Measure:
    t = np.asarray(t_key, dtype=np.float64)
    L = t.size

    def g(R):
        pp, tp, pos = R[:L], R[L : 2 * L], R[2 * L]
        return jnp.concatenate([tp / pos, (pp - tp) / (1.0 - pos)])

    labs = _threshold_labels(t)
    sfx = _suffix(system)
    names = tuple(f"tpr@{x}{sfx}" for x in labs) + tuple(f"fpr@{x}{sfx}" for x in labs)
    return _measure(
        "roc_curve" + sfx, _curve_loss(t, system), g, 2, names, _curve_pattern(t, system), fractional=True
    )


def auc(thresholds, system: int = 0) -> Measure:
    """Area under the ROC curve on a threshold grid, as a differentiable g.

    The area (trapezoid rule) under the polyline through (0, 0), the grid points
    (FPR(τ), TPR(τ)) for τ from the largest to the smallest threshold, and (1, 1).  Same loss
    as :func:`pr_curve` (001 Ex. 1).  With the grid containing every distinct score this is
    the exact ROC AUC (ties counted one half).

    Parameters
    ----------
    thresholds : array_like, shape (L,)
        Sorted internally.
    system : int, default 0

    Returns
    -------
    Measure
        m = 1, named ``"auc"``.
    """
    t = np.sort(_check_thresholds(thresholds))
    return _auc_impl(tuple(t.tolist()), _check_system(system))


@_cached
def _auc_impl(t_key: tuple, system: int) -> Measure:
    t = np.asarray(t_key, dtype=np.float64)
    L = t.size

    def g(R):
        pp, tp, pos = R[:L], R[L : 2 * L], R[2 * L]
        tpr = (tp / pos)[::-1]  # ascending τ → descending rates; reverse to ascend
        fpr = ((pp - tp) / (1.0 - pos))[::-1]
        zero = jnp.zeros((1,), dtype=_F64)
        one = jnp.ones((1,), dtype=_F64)
        x = jnp.concatenate([zero, fpr, one])
        y = jnp.concatenate([zero, tpr, one])
        return jnp.atleast_1d(jnp.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1])) / 2.0)

    name, names = _named("auc", system)
    return _measure(name, _curve_loss(t, system), g, 2, names, _curve_pattern(t, system))


# --------------------------------------------------------------------------------------
# Multi-class, 000 App. D
# --------------------------------------------------------------------------------------
def _multiclass_loss(C: int, system: int) -> Callable[[Features], jax.Array]:
    """ℓ = [TP_1..C, T_1..C, P_1..C] with TP_c = 1{y=c, f=c}, T_c = 1{y=c}, P_c = 1{f=c};
    shape (n, C, 3C)."""

    def loss(features: Features) -> jax.Array:
        f = jnp.asarray(features.preds)[:, system]
        n = f.shape[0]
        pf = jax.nn.one_hot(f, C, dtype=_F64)[:, None, :]  # (n, 1, C)
        ty = jnp.eye(C, dtype=_F64)[None, :, :]  # (1, C_y, C)
        shape = (n, C, C)
        return jnp.concatenate(
            [pf * ty, jnp.broadcast_to(ty, shape), jnp.broadcast_to(pf, shape)], axis=-1
        )

    return loss


@_cached
def macro_f1(n_classes: int, system: int = 0, definition: str = "mean_f1") -> Measure:
    """Macro-averaged F1 for single-label multi-class classification (000 App. D.3).

    ℓ = [TP_1..C, T_1..C, P_1..C] (d = 3C) with TP_c = 1{y = c, f(x) = c}, T_c = 1{y = c},
    P_c = 1{f(x) = c}.

    Parameters
    ----------
    n_classes : int
        Number of classes C ≥ 2.
    system : int, default 0
    definition : {"mean_f1", "f1_of_means"}, default "mean_f1"
        ``"mean_f1"``: mean over classes of the per-class F1, 2 TP_c / (T_c + P_c) — the
        common definition (scikit-learn ``f1_score(average='macro')``).
        ``"f1_of_means"``: harmonic mean of macro precision and macro recall,
        2PR / (P + R) with P = mean_c TP_c / P_c and R = mean_c TP_c / T_c (000 eqs. 101–102).
        A class never true and never predicted gives nan (sklearn would give 0 and warn).

    Returns
    -------
    Measure
    """
    C = _check_n_classes(n_classes)
    system = _check_system(system)
    if definition not in ("mean_f1", "f1_of_means"):
        raise ValueError(f"definition must be 'mean_f1' or 'f1_of_means'; got {definition!r}")

    if definition == "mean_f1":

        def g(R):
            tp, t, p = R[:C], R[C : 2 * C], R[2 * C :]
            return jnp.atleast_1d(jnp.mean(2.0 * tp / (t + p)))

    else:

        def g(R):
            tp, t, p = R[:C], R[C : 2 * C], R[2 * C :]
            P = jnp.mean(tp / p)
            Rc = jnp.mean(tp / t)
            return jnp.atleast_1d(2.0 * P * Rc / (P + Rc))

    name, names = _named("macro_f1", system)
    return _measure(name, _multiclass_loss(C, system), g, C, names, _pred_pattern(system))


@_cached
def micro_f1(n_classes: int, system: int = 0) -> Measure:
    """Micro-averaged F1 for single-label multi-class classification (000 App. D.1, eq. 90
    with α = 1/2).

    Same loss as :func:`macro_f1`; g(R) = Σ_c TP_c / (½ Σ_c P_c + ½ Σ_c T_c).  For
    single-label data this equals accuracy.

    Parameters
    ----------
    n_classes : int
    system : int, default 0

    Returns
    -------
    Measure
    """
    C = _check_n_classes(n_classes)
    system = _check_system(system)

    def g(R):
        tp, t, p = R[:C], R[C : 2 * C], R[2 * C :]
        return jnp.atleast_1d(jnp.sum(tp) / (0.5 * jnp.sum(p) + 0.5 * jnp.sum(t)))

    name, names = _named("micro_f1", system)
    return _measure(name, _multiclass_loss(C, system), g, C, names, _pred_pattern(system),
                    fractional=True)


@_cached
def per_class_scores(n_classes: int, system: int = 0) -> Measure:
    """Every class's F1, precision and recall on a pool of ``n_classes`` classes: the loss of
    :func:`macro_f1` (so the same cells), g(R) = [2 TP_c / (T_c + P_c), TP_c / P_c, TP_c / T_c]
    for c = 0..C−1 (3C components ``f1[c]``, ``precision[c]``, ``recall[c]``; 000 App. D.3's
    per-class terms).  What the report of a session of several classes shows per class
    (:mod:`bayes_eval.per_class`); the mean of the C F1s is :func:`macro_f1`."""
    C = _check_n_classes(n_classes)
    system = _check_system(system)

    def g(R):
        tp, t, p = R[:C], R[C: 2 * C], R[2 * C:]
        return jnp.concatenate([2.0 * tp / (t + p), tp / p, tp / t])

    names = [f"{kind}[{c}]{_suffix(system)}" for kind in ("f1", "precision", "recall") for c in range(C)]
    return _measure("per_class" + _suffix(system), _multiclass_loss(C, system), g, C, names, _pred_pattern(system))


# --------------------------------------------------------------------------------------
# Stacking
# --------------------------------------------------------------------------------------
_S_ABSTRACT = 1 << 16  # abstract system count used only to infer loss dimensions


def _loss_dim(m: Measure) -> int | None:
    """d of a measure's loss, from an abstract evaluation (no data touched)."""
    C = m.n_classes
    dummy = Features(
        jax.ShapeDtypeStruct((2, _S_ABSTRACT), jnp.int64),
        jax.ShapeDtypeStruct((2, _S_ABSTRACT), _F64),
        jax.ShapeDtypeStruct((2, _S_ABSTRACT, C), _F64),
    )
    try:
        out = jax.eval_shape(m.loss, dummy)
    except Exception:  # non-traceable user loss: learn d on the first real call
        return None
    return int(out.shape[-1])


def _dense(ids: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(np.asarray(ids).reshape(-1), return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(uniq.shape[0])


def _combine_patterns(ids: Sequence[np.ndarray]) -> np.ndarray:
    """One dense int64 id per distinct tuple of sub-ids (re-densified after each pairing, so
    no overflow)."""
    code, _ = _dense(ids[0])
    for other in ids[1:]:
        inv, k = _dense(other)
        code, _ = _dense(code * k + inv)
    return code


def stack(*measures: Measure) -> Measure:
    """Concatenate measures into one vector measure (001 §2.2: "several scalar measures
    simultaneously — e.g. precision and recall of a system, accuracy of several competing
    systems").

    The loss is the concatenation of the losses along d, g applies each sub-measure's g to its
    slice of R and concatenates the outputs.

    Parameters
    ----------
    *measures : Measure
        At least one; all with the same ``n_classes``.

    Returns
    -------
    Measure
        Component names concatenated (repeated names get ``#i``, i the sub-measure's index);
        ``pattern`` combines the sub-patterns into one dense int64 id when every sub-measure
        has one, else None.
    """
    if len(measures) == 0:
        raise ValueError("stack() needs at least one measure")
    for m in measures:
        if not isinstance(m, Measure):
            raise TypeError(f"stack() takes Measure objects; got {type(m).__name__}")
    if all(_hashable(m) for m in measures):
        return _stack_cached(*measures)
    return _stack_impl(*measures)


def _stack_impl(*measures: Measure) -> Measure:
    C = measures[0].n_classes
    if any(m.n_classes != C for m in measures):
        raise ValueError(
            f"stack(): n_classes must agree; got {[m.n_classes for m in measures]}"
        )
    ms = tuple(measures)
    dims: list[int | None] = [_loss_dim(m) for m in ms]

    def loss(features: Features) -> jax.Array:
        parts = [jnp.asarray(m.loss(features), dtype=_F64) for m in ms]
        for k, p in enumerate(parts):
            if dims[k] is None:
                dims[k] = int(p.shape[-1])
        return jnp.concatenate(parts, axis=-1)

    def g(R):
        if any(d is None for d in dims):
            raise RuntimeError(
                "stack(): loss dimensions unknown (a sub-loss could not be traced "
                "abstractly); call the stacked loss once first"
            )
        outs, start = [], 0
        for m, d in zip(ms, dims):
            outs.append(jnp.atleast_1d(m.g(R[start : start + d])))
            start += d
        return jnp.concatenate(outs)

    names = [nm for m in ms for nm in m.names]
    if len(set(names)) != len(names):
        names = [
            nm if names.count(nm) == 1 else f"{nm}#{i}"
            for i, m in enumerate(ms)
            for nm in m.names
        ]

    pattern = None
    if all(m.pattern is not None for m in ms):

        def pattern(features: Features) -> np.ndarray:
            return _combine_patterns([m.pattern(features) for m in ms])

    name = "stack(" + ",".join(m.name for m in ms) + ")"
    return _measure(name, loss, g, C, tuple(names), pattern, fractional=all(m.fractional for m in ms))


_stack_cached = functools.lru_cache(maxsize=256)(_stack_impl)


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------
_REGISTRY: dict[str, Callable[..., Measure]] = {
    "accuracy": accuracy,
    "balanced_accuracy": balanced_accuracy,
    "precision": precision,
    "recall": recall,
    "f1": f1,
    "fbeta": f_beta,
    "mcc": mcc,
    "fowlkes_mallows": fowlkes_mallows,
    "brier": brier,
    "pr_curve": pr_curve,
    "roc_curve": roc_curve,
    "auc": auc,
    "macro_f1": macro_f1,
    "micro_f1": micro_f1,
}

MEASURE_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get(name: str, **kw) -> Measure:
    """Build a built-in measure from its CLI name.

    Parameters
    ----------
    name : str
        One of :data:`MEASURE_NAMES`: ``accuracy``, ``balanced_accuracy``, ``precision``,
        ``recall``, ``f1``, ``fbeta`` (needs ``beta``), ``mcc``, ``fowlkes_mallows``,
        ``brier``, ``pr_curve`` / ``roc_curve`` / ``auc`` (need ``thresholds``),
        ``macro_f1`` / ``micro_f1`` (need ``n_classes``).
    **kw
        Passed to the constructor (e.g. ``system=1``, ``beta=2.0``, ``thresholds=...``).

    Returns
    -------
    Measure

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid names).
    """
    try:
        factory = _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown measure {name!r}; valid names: {', '.join(MEASURE_NAMES)}"
        ) from None
    return factory(**kw)


def takes_n_classes(name: str) -> bool:
    """Whether the built-in measure ``name`` takes the number of classes (accuracy, Brier,
    macro / micro F1, ...), so that it can be built for a pool's classes."""
    import inspect

    factory = _REGISTRY.get(name)
    return factory is not None and "n_classes" in inspect.signature(factory).parameters


#: the range of the catalogue's bounded measures, by measure name (custom measures: unknown)
_RANGES = {**dict.fromkeys(("f1", "fbeta", "f_beta", "precision", "recall", "accuracy", "balanced_accuracy", "macro_f1",
                            "micro_f1", "fowlkes_mallows", "pr_curve", "roc_curve", "auc"), (0.0, 1.0)), "mcc": (-1.0, 1.0)}


def component_range(measures, component: str):
    """(low, high) of a component of one of the catalogue's bounded measures, else None.

    A normal interval's tails beyond the range are impossible values: intervals of bounded
    measures are clipped to it (``Session.intervals``, the progress plot) — which changes
    no coverage, the truth being inside the range."""
    import re

    for m in measures:
        if component in m.names:
            base = re.sub(r"(_s\d+|\[.*)$", "", m.name.split("@")[0])
            if re.fullmatch(r"f\d+(\.\d+)?", base):  # F-beta: f1, f2, f0.5
                return (0.0, 1.0)
            return _RANGES.get(base)
    return None
