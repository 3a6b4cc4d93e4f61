"""What a pool's scores are, and the two things read from them: strata and a prior.

Classifiers hand over scores in several forms -- an SVM margin, a ``predict_proba``
probability, a logit, a rank -- that carry the same ranking.  Two things in the package
read more than the ranking:

* **the strata** (001 §5.2, CSF on an equal-width fine histogram of the score): an
  equal-width histogram of probabilities crowds the items of an imbalanced pool into the
  lowest bins, so the strata are built on a *stratification scale* that spreads the scores
  out: the score itself for margins and logits, ``logit(p)`` for probabilities, and the
  logit of the normalized rank for ranks.  The CSF cut points are invariant to affine maps
  of the scale, so a margin, its logit-calibrated probability ``sigmoid(a·s + b)`` (Platt
  scaling) and the logit give the same strata;
* **the prior** s(y = 1 | x) of the oracle models (001 §5.2 uses ``sigmoid(score)`` for an
  SVM): ``sigmoid(score)`` for margins and logits, the probability itself for
  probabilities, and for ranks (which carry no calibration) odds proportional to the rank's
  odds, pinned at 1/2 at the classifier's decision boundary.

A score is never pushed through a sigmoid when it already is a probability (issue 14: a
probability read as a margin gave every item a prior of 0.5-0.73 and F1 MSE 100-1000×
worse).
"""
from __future__ import annotations

import numpy as np

__all__ = ["SCORE_KINDS", "detect_score_kind", "stratification_scale", "prior_probability", "describe",
           "logit_of_probability", "margin_note"]

SCORE_KINDS = ("margin", "probability", "logit", "rank")
"""What a score column may be.  ``"none"`` is used internally for a pool without scores
(strata from the predictions only)."""

_CHUNK = 1 << 20


def sigmoid(x):
    """Numerically stable logistic function."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _is_rank_permutation(s: np.ndarray) -> bool:
    """Whether ``s`` (one column) is a permutation of 0..N-1 or 1..N."""
    n = s.size
    lo, hi = s.min(), s.max()
    if lo not in (0.0, 1.0) or hi != lo + n - 1:
        return False
    if not np.all(s == np.round(s)):
        return False
    seen = np.zeros(n, bool)
    seen[(s - lo).astype(np.int64)] = True
    return bool(seen.all())


def detect_score_kind(scores: np.ndarray) -> str:
    """The kind of an (N, S) score array when the user did not say: ``"probability"``
    when every score lies in [0, 1], ``"rank"`` when every column is a permutation of
    0..N-1 or 1..N (N > 2), else ``"margin"``."""
    s = np.asarray(scores)
    if s.size == 0:
        return "margin"
    lo, hi = float(s.min()), float(s.max())
    if lo >= 0.0 and hi <= 1.0:
        return "probability"
    if s.shape[0] > 2 and all(_is_rank_permutation(s[:, j]) for j in range(s.shape[1])):
        return "rank"
    return "margin"


def logit_of_probability(p: np.ndarray, interior_range: tuple | None = None) -> np.ndarray:
    """logit(p) with p = 0 and p = 1 placed just beyond the nearest interior value
    (one unit of logit), so exact zeros and ones form their own end bins without
    stretching the scale (a fixed clip at 1e-12 would put ±27.6 at the ends and crowd
    the interior into a few fine bins).  ``interior_range``: the (smallest, largest)
    interior probability of the whole pool, when ``p`` is one part of it (a partition of
    the dask engine); default: those of ``p``."""
    p = np.asarray(p, dtype=np.float64)
    interior = (p > 0) & (p < 1)
    if interior_range is None and interior.any():
        interior_range = (p[interior].min(), p[interior].max())
    if interior_range is not None:
        pmin, pmax = interior_range
        lo = np.log(pmin) - np.log1p(-pmin)
        hi = np.log(pmax) - np.log1p(-pmax)
    else:
        lo, hi = 0.0, 0.0
    out = np.empty_like(p)
    with np.errstate(divide="ignore"):
        out[interior] = np.log(p[interior]) - np.log1p(-p[interior])
    out[p <= 0] = lo - 1.0
    out[p >= 1] = hi + 1.0
    return out


def _logit_of_rank(s: np.ndarray) -> np.ndarray:
    """logit((r - 1/2) / N) of the average rank r (1..N) of each score: ties share
    their average rank."""
    n = s.size
    order = np.argsort(s, kind="stable")
    ss = s[order]
    # average ranks of tied runs
    starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
    ends = np.r_[starts[1:], n]
    avg = (starts + ends + 1) / 2.0  # mean of ranks starts+1..ends
    run = np.repeat(np.arange(starts.size), ends - starts)
    r = np.empty(n)
    r[order] = avg[run]
    u = (r - 0.5) / n
    return np.log(u) - np.log1p(-u)


def stratification_scale(scores: np.ndarray, kind: str) -> np.ndarray:
    """One system's scores (N,) on the scale the strata are built on (see the module
    docstring): a strictly increasing function of the score, so equal scores stay equal
    and the ranking is kept."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if kind in ("margin", "logit", "none"):
        if s.size and 0.5 * s.max() - 0.5 * s.min() > 0.5 * np.finfo(np.float64).max:
            # finite scores whose range overflows (-1e308 and 1e308): halved, so the CSF
            # histogram's (s - lo) / (hi - lo) stays finite (it gave NaN bin codes and a
            # ValueError from bincount); the strata are invariant to the scale
            return np.ldexp(s, -1)
        return s
    if kind == "probability":
        return logit_of_probability(s)
    if kind == "rank":
        return _logit_of_rank(s)
    raise ValueError(f"unknown score kind {kind!r}; use one of {', '.join(SCORE_KINDS)}")


def prior_probability(scores: np.ndarray, preds: np.ndarray, kind: str, out: np.ndarray | None = None) -> np.ndarray:
    """The classifier's own probability s(y = 1 | x) of every item (N, S), the prior of
    the oracle models (001 §5.2), from scores of the given kind (see the module
    docstring).  ``preds`` (N, S) place the decision boundary of rank scores; a pool
    without scores (``kind="none"``) gets 1/2 everywhere (no information).  ``out``
    (N, S), if given, is filled in place (in chunks) and returned."""
    s = np.asarray(scores, dtype=np.float64)
    n, n_sys = s.shape
    if out is None:
        out = np.empty((n, n_sys))
    if kind in ("margin", "logit"):
        for a in range(0, n, _CHUNK):  # chunks: no N-sized temporaries on 10^8-item pools
            out[a:a + _CHUNK] = sigmoid(s[a:a + _CHUNK])
        return out
    if kind == "probability":
        for a in range(0, n, _CHUNK):
            out[a:a + _CHUNK] = s[a:a + _CHUNK]
        return out
    if kind == "none":
        out[:] = 0.5
        return out
    if kind == "rank":
        for j in range(n_sys):
            z = _logit_of_rank(s[:, j])
            neg = float(np.mean(np.asarray(preds)[:, j] == 0))
            u0 = min(max(neg, 0.5 / n), 1 - 0.5 / n)
            out[:, j] = sigmoid(z - (np.log(u0) - np.log1p(-u0)))
        return out
    raise ValueError(f"unknown score kind {kind!r}; use one of {', '.join(SCORE_KINDS)}")


def prior_of_classes(scores: np.ndarray, preds: np.ndarray, kind: str, n_classes: int,
                     shares: np.ndarray | None = None) -> np.ndarray:
    """The classifier's prior s(y | x) (N, S, C) of a pool of C > 2 classes given one score per
    item and system and no class probabilities: the score read as the classifier's confidence in
    its predicted class -- the probability itself, sigmoid of a margin or a logit (001 §5.2), at
    least what keeps it the top class -- on the predicted class, the rest spread over the
    others in proportion to how often the classifier predicts them (evenly, a class of 0.5% got a
    quarter of every other class's errors, and the interval of macro-F1 held the truth in 62-81% of
    runs).  ``shares`` (C,): the pool's predicted-class counts where ``preds`` is a part of it (a
    partition on the dask engine: every partition spreads as the whole pool does).  Ranks and absent scores carry no calibration: halfway between uniform and the
    prediction.  Why: the oracle models' units are cells of one predicted class, and the calibrated
    model's top-class split (``models/calibrated_classes.py``) follows P(y = pred) along this
    confidence; with one prior for every item of a class its curve was flat and its interval of
    macro-F1 held the truth in 41% of AIS runs (``benchmarks/results/several_classes.md``)."""
    s = np.asarray(scores, dtype=np.float64)
    p = np.asarray(preds)
    n, n_sys = s.shape
    c = int(n_classes)
    out = np.empty((n, n_sys, c))
    if shares is not None:
        share = np.broadcast_to(np.asarray(shares, np.float64) + 1.0, (n_sys, c))
    else:
        share = np.stack([np.bincount(p[:, j].astype(np.int64), minlength=c) for j in range(n_sys)]) + 1.0   # (S, C)
    for a in range(0, n, _CHUNK):   # chunks: no N-sized temporaries beyond the output
        sa, pa = s[a:a + _CHUNK], p[a:a + _CHUNK]
        if kind in ("margin", "logit"):
            conf = sigmoid(sa)
        elif kind == "probability":
            conf = sa.copy()
        else:
            conf = np.full(sa.shape, 0.5 + 0.5 / c)
        pk = pa[..., None].astype(np.int64)
        rest = np.broadcast_to(share[None], pa.shape + (c,)).copy()   # the other classes' weights
        np.put_along_axis(rest, pk, 0.0, axis=-1)
        rest /= rest.sum(-1, keepdims=True)
        top = rest.max(-1)   # the predicted class stays the top one: conf >= (1 - conf) * top
        conf = np.maximum(conf, np.maximum(1.0 / c, top / (1.0 + top)) * (1.0 + 1e-9))
        out[a:a + _CHUNK] = (1.0 - conf)[..., None] * rest
        np.put_along_axis(out[a:a + _CHUNK], pk, conf[..., None], axis=-1)
    return out


def describe(kind: str, detected: bool, n_classes: int = 2) -> str:
    """One line for the user: what the scores were read as, and why (with several classes: the
    confidence in the predicted class, :func:`prior_of_classes`)."""
    how = {
        "margin": "margins (any real value, e.g. an SVM decision value); prior sigmoid(score), strata on the score",
        "logit": "logits; prior sigmoid(score), strata on the score",
        "probability": "probabilities; prior = the score, strata on logit(score)",
        "rank": "ranks (no calibration); prior from the rank and the decision boundary, strata on logit(rank / N)",
        "none": "absent: strata from the predictions only",
    }[kind]
    if n_classes > 2:   # the score is the confidence in the predicted class (prior_of_classes)
        how = {
            "margin": "margins of the predicted class; prior sigmoid(score) on it (the rest as the classes are predicted), strata on the score",
            "logit": "logits of the predicted class; prior sigmoid(score) on it (the rest as the classes are predicted), strata on the score",
            "probability": "probabilities of the predicted class; prior = the score on it (the rest as the classes are predicted), "
                           "strata on logit(score)",
            "rank": "ranks (no calibration); prior halfway between uniform and the prediction, strata on logit(rank / N)",
        }.get(kind, how)
    extra = ""
    if n_classes > 2 and kind != "none":   # what a file of pred + score cannot say: which classes are confused
        extra = ("; no class probabilities: each class's errors are split a priori half as often as the classifier "
                 "predicts the others, half as the labels' confusions in the other direction say (--prob-columns "
                 "gives the probability of every class; Python probs=)")
    if not detected:
        return f"scores read as {how}{extra}"
    why = {"probability": " (all in [0, 1]; score_kind / --score-kind overrides)",
           "rank": " (a permutation of 1..N; score_kind / --score-kind overrides)",
           "margin": ""}.get(kind, "")
    return f"scores read as {how}{why}{extra}"


def margin_note(scores: np.ndarray, ids, column: str = "score") -> str | None:
    """A note for scores *detected* as margins that look like something else, else None:
    probabilities but for a few rows outside [0, 1] (at most 1% of the rows; those rows
    named), or percentages (every score in [0, 100], some above 1).  Read as margins, their
    prior is sigmoid(score): about 1 for every item above a few percent."""
    s = np.asarray(scores, dtype=np.float64)
    n = s.shape[0]
    count, first = 0, []
    for a in range(0, n, _CHUNK):   # chunks: no N-sized temporaries (10^8-item pools)
        c = s[a:a + _CHUNK]
        c = c.reshape(c.shape[0], -1)
        out = np.flatnonzero(((c < 0) | (c > 1)).any(axis=1))
        count += out.size
        first.extend((a + out[:4 - len(first)]).tolist())
    rows = np.asarray(first, np.int64)
    how = "score_kind='probability' / --score-kind probability"
    if n >= 20 and 0 < count <= max(1, n // 100):
        def at(r):   # the value outside [0, 1], its row and item
            v, item = s[r].reshape(-1), ids[r]
            item = item.item() if isinstance(item, np.generic) else item
            return f"{float(v.max() if v.max() > 1 else v.min()):g} at row {r} (item {item!r})"
        where = ", ".join(at(r) for r in rows[:3]) + (", ..." if count > 3 else "")
        return (f"column {column!r}: {count} of {n:,} scores lie outside [0, 1] ({where}), so every score is read "
                f"as a margin; if they are probabilities, fix {'that row' if count == 1 else 'those rows'} "
                f"({how} then names {'it' if count == 1 else 'them'})")
    if count and s.min() >= 0 and s.max() <= 100:
        return (f"column {column!r}: every score lies in [0, 100] and {count:,} of {n:,} exceed 1: if they are "
                f"percentages, divide them by 100 (there is no percentage score kind; read as probabilities then); "
                f"score_kind='margin' / --score-kind margin keeps the margin reading without this note")
    return None
