"""One entry point over a table of rows (a pandas DataFrame) for every estimator of seed 004
(:mod:`bayes_eval.subsampled`, :mod:`bayes_eval.subsampled_auc`,
:mod:`bayes_eval.subsampled_calibration`, :mod:`bayes_eval.subsampled_policy`): picks the
columns, the keep rate (a number or a column of per-row ``l``) or the per-row keep
probabilities, and names a missing column in its error.  ``bayes-eval subsampled`` calls
:func:`estimate`; :func:`from_session_sample` feeds it a labeled sample exported from a
session (the ``q`` column is each item's inclusion probability).
"""
from __future__ import annotations

import numpy as np

from . import subsampled as S
from . import subsampled_auc as SA
from . import subsampled_calibration as SC
from . import subsampled_policy as SP
from .errors import PoolError, UsageError
from .scores import detect_score_kind, prior_probability

__all__ = ["COLUMNS", "estimate", "from_session_sample", "resolve_keep"]

#: the columns each measure reads
COLUMNS = {"auc": ("score", "label"), "f1": ("pred", "label"), "precision": ("pred", "label"),
           "recall": ("pred", "label"), "accuracy": ("pred", "label"), "pr_curve": ("score", "label"),
           "roc_curve": ("score", "label"), "calibration": ("score", "label"),
           "policy-value": ("action", "propensity", "reward", "target_action")}


def _col(frame, name):
    if name not in frame.columns:
        raise PoolError(f"the data have no column {name!r} (columns: {', '.join(map(str, frame.columns))})")
    return frame[name].to_numpy()


def resolve_keep(frame, keep_rate=None, keep_prob=None) -> tuple:
    """``keep_rate`` a number (or a string holding one) or the name of a column of per-row
    ``l``; ``keep_prob`` the name of a column of per-row inclusion probabilities (or an
    array).  Returns ``(keyword arguments of the estimators, the column / flag named in errors)``."""
    if keep_rate is not None and keep_prob is not None:
        raise UsageError("give --keep-rate L or --keep-prob COLUMN, not both")
    if keep_prob is not None:
        if isinstance(keep_prob, str):
            return {"keep_prob": np.asarray(_col(frame, keep_prob), float)}, keep_prob
        return {"keep_prob": np.asarray(keep_prob, float)}, "keep_prob"
    if keep_rate is None:
        return {}, None
    if isinstance(keep_rate, str):
        try:
            return {"keep_rate": float(keep_rate)}, "--keep-rate"
        except ValueError:
            if keep_rate not in frame.columns and keep_rate.strip().endswith("%"):
                raise UsageError(f"--keep-rate {keep_rate!r}: give the keep rate as a number in (0, 1] "
                                 f"(e.g. 0.1 for 10%) or the name of a column of per-row rates") from None
            return {"keep_rate": np.asarray(_col(frame, keep_rate), float)}, keep_rate
    return {"keep_rate": keep_rate}, "--keep-rate"


def estimate(frame, measure: str, *, keep_rate=None, keep_prob=None, target: str = "data",
             interval: str = "delong", n_total=None, bins: int = 10, n_thresholds: int = 50, level: float = 0.95,
             delta: float | None = None) -> S.SubsampledEstimate:
    """``measure`` (one of :data:`bayes_eval.subsampled.MEASURES`, or the catalogue
    :class:`~bayes_eval.measures.Measure` of one without parameters: ``measures.f1()``,
    ``precision()``, ``recall()``, ``accuracy()``) from the rows of ``frame``; errors name the
    column and row (:class:`bayes_eval.errors.PoolError`)."""
    measure = _measure_name(measure)
    kw, col = resolve_keep(frame, keep_rate, keep_prob)
    for c in COLUMNS[measure]:
        _col(frame, c)
    try:
        return _dispatch(frame, measure, kw, target, interval, n_total, bins, n_thresholds, level, delta)
    except PoolError as e:  # name the user's column instead of the estimators' placeholder
        msg, cli = str(e), e.cli
        if col is not None:
            msg, cli = (None if m is None else m.replace("'keep_prob'", repr(col)).replace("'--keep-rate'", repr(col))
                        for m in (msg, cli))
        raise PoolError(msg, cli=cli) from None


#: the catalogue measures :func:`estimate` takes as objects: those without parameters
_PLAIN = ("f1", "precision", "recall", "accuracy")


def _measure_name(measure) -> str:
    """The name in :data:`COLUMNS` of ``measure`` (a name, or a parameterless catalogue Measure)."""
    from .measures import Measure

    names = ", ".join(repr(m) for m in COLUMNS)
    if isinstance(measure, Measure):
        if measure.name in _PLAIN:
            return measure.name
        raise UsageError(f"estimate takes a measure name ({names}) or the Measure of f1, precision, recall or "
                         f"accuracy; for the Measure {measure.name!r}"
                         + (f" pass the name {measure.name!r}, or" if measure.name in COLUMNS else "")
                         + " call bayes_eval.subsampled.measure(m, labels, preds, scores, keep_rate=...) (any "
                           "catalogue measure, its parameters kept)")
    if measure not in COLUMNS:
        raise UsageError(f"measure must be one of {names}, got {measure!r}",
                         cli=f"--measure must be one of {', '.join(COLUMNS)}, got {measure!r}")
    return measure


def _dispatch(frame, measure, kw, target, interval, n_total, bins, n_thresholds, level, delta):
    if measure == "policy-value":
        return SP.policy_value(_col(frame, "action"), _col(frame, "propensity"), _col(frame, "reward"),
                               _col(frame, "target_action"), n_total=n_total, level=level, **kw)
    y = _col(frame, "label")
    if "score" in frame.columns:   # a NaN or infinite score is bad data whether or not this measure reads it
        S.check_finite(_col(frame, "score"), "score")
    if measure == "auc":
        return SA.auc(y, _col(frame, "score"), target=target, interval=interval, level=level, delta=delta, **kw)
    if measure == "calibration":
        # the seed calibrates an estimate of E[r | x]: scores that are not probabilities
        # (SVM margins, ranks) are read as the classifier's own probability first
        # (:func:`bayes_eval.scores.prior_probability`, sigmoid of a margin as in 001 §5.2)
        s = S.check_finite(_col(frame, "score"), "score")
        kind = detect_score_kind(s[:, None])
        if kind != "probability":
            preds = _col(frame, "pred") if "pred" in frame.columns else (s >= 0)
            s = prior_probability(s[:, None], np.asarray(preds, np.int64)[:, None], kind)[:, 0]
        est = SC.calibration(s, y, bins=bins, level=level, **kw)
        est.extra["score_kind"] = kind
        return est
    if measure in ("pr_curve", "roc_curve"):
        f = S.pr_curve if measure == "pr_curve" else S.roc_curve
        return f(y, _col(frame, "score"), n_thresholds=n_thresholds, target=target, n_total=n_total, level=level,
                 **kw)
    fn = {"f1": S.f1, "precision": S.precision, "recall": S.recall, "accuracy": S.accuracy}[measure]
    return fn(y, _col(frame, "pred"), target=target, n_total=n_total, level=level, **kw)


def from_session_sample(frame, measure: str, *, q_column: str = "q", **kw) -> S.SubsampledEstimate:
    """A measure from a labeled sample exported from a session of a Poisson design (rows
    ``score``, ``pred``, ``label`` and ``q``, the inclusion probability each item was drawn
    with, ``Session.next_batch``): :func:`estimate` with ``keep_prob = q`` — the HT entry
    point of every other thinned data set.  Exact for one round of the static ``poisson``
    design; with adaptive rounds ``q`` holds given the earlier rounds (use the session's
    combined estimate for the interval there)."""
    return estimate(frame, measure, keep_prob=q_column, **kw)
