"""The unlabeled pool: items, the systems' predictions and scores, item weights.

A :class:`Pool` is validated once, when it is built, and is immutable afterwards.  Every
bad input raises :class:`PoolError` naming the column and the first offending row, so a
user never gets a NaN estimate back from a NaN score (brief: "bad input gets a clear
error").

The pool is the finite test pool T = {x_1..x_M} of 001 §2.1; item weights are the
marginal p(x) (uniform by default, 001 Remark 2).  Ground-truth ``labels`` are optional
and used only to *simulate* an oracle.
"""
from __future__ import annotations

import functools
import hashlib
import os
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from . import _config  # noqa: F401
from .derived import derived_value
from .fingerprints import array_digest, combine_portable, hash_ids

__all__ = ["Pool", "PoolError", "PoolWarning", "sigmoid", "demo_pool", "SCORE_KINDS"]


from .errors import PoolError  # noqa: E402  (re-exported)
from .scores import SCORE_KINDS, describe, detect_score_kind, prior_of_classes, prior_probability, sigmoid  # noqa: E402,F401
from .scores import margin_note, stratification_scale  # noqa: E402




def _mapped_names(col: pd.Series, label_map: dict, name: str, ids) -> pd.Series:
    """A text column of class names as classes (float, NaN where missing) by ``label_map``:
    names as written, else ignoring case and surrounding spaces; a PoolError names the first
    name the map lacks, its row and item."""
    lower = {}
    for k, v in label_map.items():
        lower.setdefault(str(k).strip().lower(), set()).add(int(v))
    out = np.full(len(col), np.nan)
    for i, v in enumerate(col.to_numpy()):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            continue
        key = str(v)
        if key in label_map:
            out[i] = label_map[key]
        elif len(lower.get(key.strip().lower(), ())) == 1:
            out[i] = next(iter(lower[key.strip().lower()]))
        elif key.strip().lstrip("-").replace(".", "", 1).isdigit():
            out[i] = float(key)
        else:
            raise PoolError(f"column {name!r}: value {key!r} at row {i} (item {_py(ids[i])!r}) is not in the label map "
                            f"({', '.join(f'{k}={v}' for k, v in label_map.items())})")
    return pd.Series(out, index=col.index)


def _csv_ids(col: pd.Series) -> pd.Series:
    """A CSV's id column, read as text: integers where every id is written as one (``17``,
    ``-3``), else the text as written -- ``00017`` stays ``00017`` and is not the id ``17``
    (pandas' own guess read zero-padded ids as integers, renumbering them and making ``001``
    and ``1`` one id)."""
    if len(col) and not col.isna().any() and col.str.fullmatch(r"-?(0|[1-9][0-9]{0,17})").all():
        return col.astype(np.int64)
    return col   # with a missing id: as read, for the pool's check to name it


def _looks_like_ids(name: str, col: pd.Series) -> bool:
    """A column named like ids (``id``, ``item_id``, ``docId``, ...) with one distinct,
    non-missing value per row: what a user may have meant as the pool's item ids."""
    low = name.lower()
    if not (low in ("id", "key", "uid", "uuid") or low.endswith("_id") or name.endswith("Id")):
        return False
    return bool(col.notna().all() and col.is_unique)


class PoolWarning(UserWarning):
    """Something about the pool the user should know (a column missing, a value read in
    a way they may not expect); the same text is in :attr:`Pool.notes`."""




# the column checks live in checks.py, shared with measures.features_from_arrays
from .checks import (all_distinct as _all_distinct, as_2d as _as_2d, check_class_sums as _check_class_sums, check_finite as _check_finite,  # noqa: E402
                     check_label_map as _check_label_map,
                     check_labels as _check_labels, class_names_hint as _class_names_hint, column_of as _column_of,
                     first_bad as _first_bad, missing_column as _missing_column,
                     partial_labels_note as _partial_labels_note, pred_argmax_note as _pred_argmax_note,
                     py_scalar as _py, zero_padded_hint as _zero_padded_hint)


@dataclass(frozen=True, eq=False)
class Pool:
    """A validated pool of N items scored by S systems, with C classes.

    Attributes
    ----------
    preds : (N, S) int32
        Each system's predicted label.
    scores : (N, S) float64
        Each system's real-valued score (larger = more likely positive).
    probs : (N, S, C) float64
        Each system's probability of each class; for binary pools without a probability
        column, ``sigmoid(score)`` as in 001 §5.2.
    weights : (N,) float64
        Item weights p(x), normalised to sum to one (uniform by default).
    ids : (N,) array
        Stable item ids (row positions by default).
    labels : (N,) int32 or None
        Ground truth, only for simulating an oracle.
    columns : pandas.DataFrame
        The pool's own columns (what an annotator sees), indexed like the items.
    score_kind : {"margin", "probability", "logit", "rank", "none"}
        What the scores are (:mod:`bayes_eval.scores`): it decides the prior ``probs``
        and the scale the strata are built on.  ``"none"``: the pool had no scores.
    threshold : float or None
        The threshold the predictions were derived with (``pred = score >= threshold``),
        when the pool had no ``pred`` column.
    notes : tuple of str
        What was detected or derived when the pool was read, in words (printed by
        ``bayes-eval session new``).
    id_column : str or None
        The column the ids were read from when it is not ``item`` (``--id-column``,
        :meth:`from_frame`'s ``item=``); None for the ``item`` column, the index or row numbers.
    column_names : tuple of (role, column) pairs
        The pool file's own names of its score / pred / label columns where they are not
        ``score`` / ``pred`` / ``label`` (``--score-column`` etc.,
        :func:`bayes_eval.registry.load_pool`'s ``columns=``), and the ``prob`` role's tuple of
        class probability columns (``--prob-columns``); a session records them.
    label_names : tuple of (name, class) pairs
        The label map a text ``pred`` / ``label`` column was read with (``--label-map``,
        ``label_map=``); a session records it.
    classes_prior : str
        How a pool of several classes without class probabilities got its prior (``"confidence"``:
        :func:`bayes_eval.scores.prior_of_classes`; ``"halfway"``: as releases before); a session
        records it.
    probs_derived : bool
        Whether ``probs`` were derived from the scores (no probability column); the session's
        portable fingerprint leaves them out (:mod:`bayes_eval.fingerprints`).
    """

    preds: np.ndarray
    scores: np.ndarray
    probs: np.ndarray
    weights: np.ndarray
    ids: np.ndarray
    labels: np.ndarray | None
    n_classes: int = 2
    system_names: tuple = ("system0",)
    columns: pd.DataFrame | None = field(default=None, repr=False)
    name: str = "pool"
    score_kind: str = "margin"
    threshold: float | None = None
    notes: tuple = ()
    id_column: str | None = None
    column_names: tuple = ()
    label_names: tuple = ()
    classes_prior: str = "confidence"
    probs_derived: bool = False

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_arrays(
        cls,
        scores=None,
        preds=None,
        probs=None,
        labels=None,
        weights=None,
        ids=None,
        n_classes: int = 2,
        system_names: Sequence[str] | None = None,
        columns: pd.DataFrame | None = None,
        name: str = "pool",
        score_kind: str | None = None,
        threshold: float | None = None,
        legacy: bool = False,
        classes_prior: str = "confidence",
        class_shares=None,
        names: dict | None = None,
    ) -> "Pool":
        """Build and validate a pool from numpy arrays.

        ``scores``/``preds``/``probs`` may be 1-D (one system) or 2-D (items × systems);
        ``probs`` may also be (N, S, C).

        ``score_kind`` says what the scores are -- ``"margin"`` (an SVM decision value,
        any real number), ``"probability"``, ``"logit"`` or ``"rank"`` -- and decides the
        prior ``probs`` and the scale of the strata (:mod:`bayes_eval.scores`).  None (or
        ``"auto"``) detects it: all scores in [0, 1] are probabilities, a permutation of
        1..N ranks, anything else margins; :attr:`notes` says what was chosen.

        Predictions are never made up: without ``preds``, ``threshold`` derives them as
        ``score >= threshold`` (in the score's own units, e.g. 0.5 for probabilities, 0
        for margins); a multi-class pool without ``preds`` takes the argmax of
        ``probs``.  Without scores, the strata come from the predictions alone and a
        :class:`PoolWarning` says the designs cannot adapt within a predicted class.
        ``legacy=True`` reads the pool as releases before score kinds did (scores are
        margins; missing predictions are ``score >= 0``), so that old session files
        reopen on the same pool.  ``classes_prior`` (C > 2, no class probabilities): ``"confidence"``
        reads the score as the confidence in the predicted class
        (:func:`bayes_eval.scores.prior_of_classes`); ``"halfway"`` gives every item the prior halfway
        between uniform and its prediction, and a pool without scores the last class's probability as
        its score, as releases before did (sessions created then reopen on the pool they were built on).
        ``class_shares`` (C,): the whole pool's predicted-class counts when these arrays are a part of it.
        ``names`` ({role: column name or names}): the user's own names of the columns, which messages name
        (:meth:`from_frame` passes its frame's); default the roles' names (``score``, ``item``, ...).
        """
        cols = dict(names or {})
        N = {r: _column_of(r, cols.get(r), ()) for r in ("score", "pred", "prob", "label", "weight", "item")}
        if classes_prior not in ("confidence", "halfway"):
            raise PoolError(f"classes_prior must be 'confidence' or 'halfway', got {classes_prior!r}")
        if n_classes < 2:
            raise PoolError(f"n_classes must be at least 2, got {n_classes}")
        if scores is None and preds is None and probs is None:
            raise PoolError("a pool needs at least one of scores, preds or probs")
        if score_kind == "auto":
            score_kind = None
        if score_kind is not None and score_kind not in SCORE_KINDS:
            raise PoolError(f"unknown score kind {score_kind!r}; use one of auto, {', '.join(SCORE_KINDS)}",
                            cli=f"unknown --score-kind {score_kind!r}; use one of auto, {', '.join(SCORE_KINDS)}")
        if legacy and score_kind is None:
            score_kind = "margin"
        if threshold is not None:
            try:
                threshold = float(threshold)
            except (TypeError, ValueError):
                raise PoolError(f"threshold must be a number, got {threshold!r}",
                                cli=f"--threshold must be a number, got {threshold!r}") from None
            if not np.isfinite(threshold):
                raise PoolError(f"threshold must be finite, got {threshold}", cli=f"--threshold must be finite, got {threshold}")
        n = None
        for nm, a in (("score", scores), ("pred", preds), ("prob", probs), ("label", labels), ("weight", weights), ("item", ids)):
            if a is not None:
                arr_a = np.asarray(a)
                if arr_a.ndim == 0:
                    raise PoolError(f"column {N[nm]!r}: expected one value per item, got a single value {_py(arr_a[()])!r}")
                m = len(arr_a)
                if n is None:
                    n = m
                elif m != n:
                    raise PoolError(
                        f"column {N[nm]!r}: has {m} rows but earlier columns have {n} (mismatched lengths)"
                    )
        if n == 0:
            raise PoolError("the pool is empty (0 items)")
        if ids is None:
            ids_arr = np.arange(n)
        else:
            ids_arr = np.asarray(ids)
            if ids_arr.ndim != 1:
                raise PoolError(f"column {N['item']!r}: ids must be 1-D, got shape {ids_arr.shape}")
            if pd.isna(pd.Series(ids_arr)).any():
                row = _first_bad(pd.isna(pd.Series(ids_arr)).to_numpy())
                raise PoolError(f"column {N['item']!r}: missing id at row {row}")
            try:
                unique = _all_distinct(ids_arr)
            except TypeError:
                # mixed types (strings and numbers): kept as given (they used to be turned
                # into text, so the id 7 could only be found again as "7"), but unique as
                # text, as sessions and label files match them: 0 and "0" are one id there
                # (pandas' astype(str), not numpy's, which drops a final "\x00")
                as_text = pd.Series(ids_arr).astype(str).duplicated().to_numpy()
                row = _first_bad(as_text)
                if row is not None:
                    raise PoolError(f"column {N['item']!r}: id {_py(ids_arr[row])!r} at row {row} is a duplicate of an "
                                    "earlier id written the same way (ids of mixed types are matched as text)")
                unique = True
            if not unique:
                # the second occurrence, found by pandas: numpy's `ids == dup` missed a
                # string id ending in "\x00" (IndexError instead of this message)
                dup_rows = pd.Series(ids_arr).duplicated().to_numpy()
                if dup_rows.any():
                    row = _first_bad(dup_rows)
                    raise PoolError(f"column {N['item']!r}: duplicate id {_py(ids_arr[row])!r} at row {row}")
        notes = []
        if scores is not None:
            s = _as_2d("score", np.asarray(scores), n)
            if s.dtype.kind not in "biuf":
                try:
                    s = s.astype(np.float64)
                except (TypeError, ValueError):
                    flat = pd.to_numeric(pd.Series(s.reshape(-1)), errors="coerce")
                    row = _first_bad(flat.isna().to_numpy() & pd.Series(s.reshape(-1)).notna().to_numpy())
                    row = 0 if row is None else row // s.shape[1]
                    raise PoolError(f"column {N['score']!r}: non-numeric value {_py(s[row].tolist()[0])!r} at row {row} "
                                    f"(item {_py(ids_arr[row])!r})") from None
            s = s.astype(np.float64)
            _check_finite("score", s, ids_arr, cols.get("score"))
        else:
            s = None
        pr = None
        if probs is not None:
            try:
                pr = np.asarray(probs, dtype=np.float64)
            except (TypeError, ValueError):
                raise PoolError(f"column {N['prob']!r}: not numeric") from None
            if pr.ndim == 1:
                if n_classes != 2:
                    raise PoolError(f"column {N['prob']!r}: 1-D probabilities are only meaningful for binary pools")
                pr = np.stack([1 - pr, pr], axis=-1)[:, None, :]
            elif pr.ndim == 2:
                # binary: (N, S) positive-class probabilities; multi-class: (N, C), one system
                pr = np.stack([1 - pr, pr], axis=-1) if n_classes == 2 else pr[:, None, :]
            if pr.shape[0] != n:
                raise PoolError(f"column {N['prob']!r}: has {pr.shape[0]} rows but the pool has {n} items (mismatched lengths)")
            if pr.shape[-1] != n_classes:
                raise PoolError(f"column {N['prob']!r}: last axis has {pr.shape[-1]} classes, expected {n_classes}")
            _check_finite("prob", pr, ids_arr, cols.get("prob"))
            bad = ((pr < 0) | (pr > 1)).reshape(n, -1).any(axis=1)
            row = _first_bad(bad)
            if row is not None:
                raise PoolError(f"column {_column_of('prob', cols.get('prob'), (pr[row] < 0) | (pr[row] > 1))!r}: value "
                                f"outside [0, 1] at row {row} (item {_py(ids_arr[row])!r})")
            if n_classes > 2 and (off := _check_class_sums(N["prob"], pr, ids_arr, n_classes)):
                notes.append(off)   # one distribution over the classes per item (and system), up to rounding
        # what the scores are
        score_of_probs = s is None and pr is not None
        if score_of_probs:
            s = pr[..., -1]   # several classes: the predicted class's probability, once the predictions are known
            kind, detected = "probability", False
            if score_kind not in (None, "probability"):
                why = "given, but the pool has no score column (its scores are taken from the 'prob' column)"
                raise PoolError(f"score kind {score_kind!r} {why}", cli=f"--score-kind {score_kind} {why}")
        elif s is None:
            kind, detected = "none", False
        elif score_kind is None:
            kind, detected = detect_score_kind(s), True
        else:
            kind, detected = score_kind, False
        if kind == "probability" and s is not None and (s.min() < 0 or s.max() > 1):
            row = _first_bad(((s < 0) | (s > 1)).any(axis=1))
            bad = (f"but value {_py(s[row].max() if s[row].max() > 1 else s[row].min())} at row {row} "
                   f"(item {_py(ids_arr[row])!r}) is outside [0, 1]")
            raise PoolError(f"column {N['score']!r}: score kind 'probability' {bad}",
                            cli=f"column {N['score']!r}: --score-kind probability {bad}")
        if kind != "none" and pr is not None and n_classes > 2:
            notes.append("class probabilities given: the prior of every class is its probability; the score is the "
                         "predicted class's" + (" probability, strata on logit(score)" if score_of_probs else
                                                f" (its own column, read as {kind})"))
        elif kind != "none":
            notes.append(describe(kind, detected, n_classes if classes_prior == "confidence" else 2))
        if detected and kind == "margin" and (hint := margin_note(s, ids_arr, N["score"])):
            notes.append(hint)   # percentages, or probabilities but for a stray row
        # what the predictions are
        if preds is not None:
            if threshold is not None:
                raise PoolError(f"the pool has a 'pred' column; a threshold ({threshold}) derives predictions only "
                                "for a pool without one",
                                cli=f"the pool has a 'pred' column; --threshold ({threshold}) derives predictions only "
                                "for a pool without one")
            p = _as_2d("pred", preds, n)
            p = _check_labels("pred", p, n_classes, ids_arr, cols.get("pred"))
            if pr is not None and n_classes > 2 and (off := _pred_argmax_note(p, pr, ids_arr, N["pred"])):
                notes.append(off)
        elif threshold is not None:
            if kind == "none" or n_classes != 2:
                what = "no score or prob column" if kind == "none" else f"{n_classes} classes"
                raise PoolError(f"a threshold derives predictions from binary scores; this pool has {what}",
                                cli=f"--threshold derives predictions from binary scores; this pool has {what}")
            p = (s >= threshold).astype(np.int32)
            pos = " / ".join(f"{int(c)}" for c in p.sum(0))     # per system
            notes.append(f"predictions derived as score >= {threshold:g} ({pos} of {n} positive)")
        elif pr is not None and n_classes > 2:
            p = pr.argmax(-1).astype(np.int32)
            notes.append("predictions are the argmax of the 'prob' columns")
        elif legacy and n_classes == 2 and s is not None:
            p = (s >= 0).astype(np.int32)
            notes.append("predictions derived as score >= 0 (as sessions created before score kinds)")
        else:
            if n_classes != 2:
                raise PoolError("column 'pred': predictions are required for multi-class pools without a 'prob' column")
            hint = {"probability": "0.5", "margin": "0", "logit": "0"}.get(kind, "T")
            missing = ("column 'pred' not found: the pool needs the classifier's predicted labels. Add a 'pred' "
                       "column, name the column that holds them (NAMED), or derive them from the scores with ")
            raise PoolError(missing.replace("NAMED", "pred=NAME") + f"threshold={hint} (pred = score >= threshold)",
                            cli=missing.replace("NAMED", "--pred-column NAME") + f"--threshold {hint} (pred = score >= threshold)")
        n_sys = p.shape[1]
        if score_of_probs and n_classes > 2 and classes_prior == "confidence":
            s = np.take_along_axis(pr, p[..., None].astype(np.int64), axis=-1)[..., 0]
        if s is None:
            s = p.astype(np.float64)
            msg = ("no score column: strata come from the predictions only, so the adaptive designs cannot "
                   "adapt within a predicted class (add the classifier's scores for a far more precise estimate)")
            notes.append(msg)
            warnings.warn(msg, PoolWarning, stacklevel=2)
        if s.shape[1] != n_sys:
            raise PoolError(f"column 'score': {s.shape[1]} systems but 'pred' has {n_sys}")
        probs_derived = pr is None
        if pr is None:
            if n_classes == 2:
                pr = np.empty((n, n_sys, 2))
                prior_probability(s, p, kind, out=pr[..., 1])
                for a in range(0, n, 1 << 20):  # chunks: no N-sized temporaries (10^8-item pools)
                    pr[a:a + (1 << 20), :, 0] = 1.0 - pr[a:a + (1 << 20), :, 1]
            elif classes_prior == "halfway":
                pr = 0.5 * np.full((n, n_sys, n_classes), 1.0 / n_classes) + 0.5 * np.eye(n_classes)[p]
            else:
                pr = prior_of_classes(s, p, kind, n_classes, class_shares)
        if pr.shape[1] != n_sys:
            raise PoolError(f"column 'prob': {pr.shape[1]} systems but 'pred' has {n_sys}")
        if n_classes == 2 and kind != "none":
            for j in range(n_sys):
                if np.all(p[:, j] == p[0, j]):
                    notes.append(f"every item is predicted {int(p[0, j])}" + (f" by system {j}" if n_sys > 1 else ""))
        if labels is not None:
            lab = np.asarray(labels)
            if lab.ndim != 1:
                raise PoolError(f"column {N['label']!r}: expected one label per item, got shape {lab.shape}")
            lab = _check_labels("label", lab, n_classes, ids_arr, cols.get("label"))[:, 0]
        else:
            lab = None
        if weights is None:
            w = np.full(n, 1.0 / n)
        else:
            w = np.asarray(weights, dtype=np.float64).reshape(-1)
            weights_in = w
            if w.shape[0] != n:
                raise PoolError(f"column {N['weight']!r}: has {w.shape[0]} rows but the pool has {n} items")
            _check_finite("weight", w, ids_arr, cols.get("weight"))
            row = _first_bad(w <= 0)
            if row is not None:
                raise PoolError(f"column {N['weight']!r}: item weights p(x) must be positive; {_py(w[row])} at row {row} "
                                f"(item {_py(ids_arr[row])!r})")
            # scaled by the largest first: a sum of weights near 1e308 overflowed to inf
            # and made every weight 0
            w = w / w.max()
            w = w / w.sum()
            row = _first_bad(w <= 0)
            if row is not None:
                raise PoolError(f"column {N['weight']!r}: weight {_py(weights_in[row])} at row {row} (item {_py(ids_arr[row])!r}) "
                                f"is too small next to the largest weight ({_py(weights_in.max())}) to be represented")
        names = tuple(system_names) if system_names is not None else tuple(f"system{i}" for i in range(n_sys))
        if len(names) != n_sys:
            raise PoolError(f"{len(names)} system names for {n_sys} systems")
        for a in (p, s, pr, w):
            a.setflags(write=False)
        if lab is not None:
            lab.setflags(write=False)
        return cls(
            preds=p, scores=s, probs=pr, weights=w, ids=ids_arr, labels=lab, n_classes=n_classes,
            system_names=names, columns=columns, name=name, score_kind=kind,
            threshold=threshold if preds is None else None, notes=tuple(notes), classes_prior=classes_prior,
            probs_derived=probs_derived)

    @classmethod
    def from_frame(
        cls,
        df: pd.DataFrame,
        score: str | Sequence[str] | None = "score",
        pred: str | Sequence[str] | None = "pred",
        prob: str | Sequence[str] | None = None,
        label: str | None = "label",
        weight: str | None = None,
        item: str | None = None,
        n_classes: int = 2,
        name: str = "pool",
        score_kind: str | None = None,
        threshold: float | None = None,
        legacy: bool = False,
        label_map: dict | None = None,
        classes_prior: str = "confidence",
        class_shares=None,
    ) -> "Pool":
        """Build a pool from a DataFrame.

        Column names default to the layout of ``../shared/data`` (``score``, ``pred``,
        ``label``).  A column named as default but absent is skipped; a column named
        explicitly but absent is an error.  Several systems: pass lists of column names.

        Item ids: the ``item`` column names the id column (default ``"item"`` when the
        frame has one); otherwise the frame's index.  Ids are kept as given (integers stay
        the integers they are, strings the strings).  ``score_kind``, ``threshold``,
        ``legacy`` and ``classes_prior`` as :meth:`from_arrays`.  ``label_map`` ({name: class}) reads a ``pred`` or
        ``label`` column written as class names (``match`` / ``non-match``): names matched as
        written, else ignoring case; a name it lacks is refused with its row.
        """
        if not isinstance(df, pd.DataFrame):
            raise PoolError(f"expected a pandas DataFrame, got {type(df).__name__}")
        if len(df) == 0:
            raise PoolError("the pool is empty (0 rows)")

        def cols(arg, role, default):
            if arg is None:
                return None
            names = [arg] if isinstance(arg, str) else list(arg)
            missing = [c for c in names if c not in df.columns]
            if missing:
                if isinstance(arg, str) and arg == default:
                    return None
                raise _missing_column(missing[0], role, df.columns)
            return names

        sc = cols(score, "score", "score")
        pc = cols(pred, "pred", "pred")
        prc = cols(prob, "prob", None)
        lc = cols(label, "label", "label")
        wc = cols(weight, "weight", None)
        _check_label_map(label_map, n_classes, shared=False)
        if sc is None and pc is None and prc is None:
            def msg(score, pred, threshold):   # (the column names may hold braces: no str.format over them)
                return (f"no 'score' or 'pred' column; columns are {list(df.columns)}: say which column holds the "
                        f"classifier's scores ({score}) and which its predicted labels ({pred}; or derive them from "
                        f"the scores: {threshold})")
            raise PoolError(msg("score=NAME", "pred=NAME", "threshold=T"),
                            cli=msg("--score-column NAME", "--pred-column NAME", "--threshold T"))
        if item is None and "item" in df.columns:
            item = "item"
        if item is not None:
            if item not in df.columns:
                raise _missing_column(item, "item", df.columns)
            role = next((r for r, c in (("score", sc), ("prediction", pc), ("probability", prc), ("label", lc),
                                        ("weight", wc)) if c and item in c), None)
            if role is not None:
                raise PoolError(f"column {item!r} is the pool's {role} column; the item ids must be another column")
            ids = df[item].to_numpy()
        else:
            ids = df.index.to_numpy()
        if ids.dtype == object:  # a column of Python ints read as objects: keep them integers
            inferred = pd.api.types.infer_dtype(ids, skipna=False)
            if inferred == "integer":
                ids = ids.astype(np.int64)
        # a missing id first (as from_arrays would), before the values' checks name rows
        # by their ids: an integer id column with a gap reads as floats, so a bad value's
        # message named item 1001.0 for the item 1001
        if ids.dtype.kind not in "iub":  # (integers cannot be missing: no N-sized mask for them)
            missing_ids = pd.isna(pd.Series(ids)).to_numpy()
            if missing_ids.any():
                raise PoolError(f"column {item or 'item'!r}: missing id at row {_first_bad(missing_ids)}")

        used_map = []

        def arr(c, numeric=True):
            if c is None:
                return None
            sub = df[c]
            if numeric:
                for col in c:
                    if label_map and col in (pc or []) + (lc or []) and not (
                            pd.api.types.is_numeric_dtype(sub[col]) or pd.api.types.is_bool_dtype(sub[col])):
                        sub = sub.copy()
                        sub[col] = _mapped_names(sub[col], label_map, col, ids)   # numbers now: checked below
                        used_map.append(col)
                    if not (pd.api.types.is_numeric_dtype(sub[col]) or pd.api.types.is_bool_dtype(sub[col])):
                        num = pd.to_numeric(sub[col], errors="coerce")
                        bad = num.isna() & sub[col].notna()
                        row = _first_bad(bad.to_numpy())
                        if row is not None:
                            msg = f"column {col!r}: non-numeric value {_py(sub[col].iloc[row])!r} at row {row} (item {_py(ids[row])!r})"
                            if col in (pc or []) + (lc or []):   # class names: say how to map them
                                raise PoolError(msg + "; class names map to labels with label_map={NAME: LABEL, ...}",
                                                cli=msg + f"; class names map to labels with {_class_names_hint(sub[col])}")
                            raise PoolError(msg)
                        # numbers in an object, text or categorical column (Python numbers
                        # mixed with None, "0.5" from a spreadsheet): read as numbers (an
                        # all-numeric object column used to reach .iloc[None]: TypeError)
                        sub = sub.copy()
                        sub[col] = num.astype(np.float64)
            a = sub.to_numpy(dtype=np.float64 if numeric else None)
            return a[:, 0] if a.shape[1] == 1 else a

        scores = arr(sc)
        preds = arr(pc)
        if preds is not None:
            _check_finite("pred", np.asarray(preds, dtype=float).reshape(len(df), -1), ids, pc)
        probs = arr(prc)
        labels = arr(lc)
        partial = None
        if labels is not None and np.isnan(labels).any():
            # A session never reads the ground truth (only a simulation's oracle and true_value do:
            # cells.truth is for simulations), and a partly filled label column is what a user who
            # labeled some items by hand has: refusing it blocked `session new` over data it does not
            # use.  The values given are checked; the column is then left out, said in a note.
            _check_labels("label", np.where(np.isnan(labels), 0, labels), n_classes, ids, lc)
            partial, labels = _partial_labels_note(lc[0], labels), None
        weights = arr(wc)
        skip = set((sc or []) + (pc or []) + (prc or []) + (lc or []) + ([item] if item is not None else []))
        own = df[[c for c in df.columns if c not in skip]].copy()
        pool = cls.from_arrays(
            scores=scores, preds=preds, probs=probs, labels=labels, weights=weights, ids=ids,
            n_classes=n_classes, system_names=sc if sc is not None and len(sc) > 1 else None,
            columns=own, name=name, score_kind=score_kind, threshold=threshold, legacy=legacy,
            classes_prior=classes_prior, class_shares=class_shares,
            names={"score": sc, "pred": pc, "prob": prc, "label": lc, "weight": wc, "item": item},
        )
        if partial:
            pool = replace(pool, notes=pool.notes + (partial,))
        if used_map:
            pool = replace(pool, label_names=tuple(sorted(label_map.items())), notes=pool.notes + (
                f"class names in column(s) {', '.join(map(repr, used_map))} read with the label map "
                f"{', '.join(f'{k}={v}' for k, v in label_map.items())}",))
        if item is not None and item != "item":
            return replace(pool, id_column=item, notes=pool.notes + (f"item ids from column {item!r}",))
        if item is None and isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1:
            # ids are row numbers: say so where the pool has a column that looks like its own ids
            cand = [c for c in own.columns if isinstance(c, str) and _looks_like_ids(c, own[c])]
            if cand:
                return replace(pool, notes=pool.notes + (
                    f"item ids are the row numbers 0..{len(df) - 1} (no 'item' column); column {cand[0]!r} holds a "
                    f"unique value per row: to use it as the ids, name it 'item' or pass --id-column {cand[0]} "
                    f"(Python: item={cand[0]!r})",))
        return pool

    @classmethod
    def from_file(cls, path: str, csv_ids: str = "text", **kw) -> "Pool":
        """Read a pool from Parquet, JSON lines, JSON or CSV / TSV (:func:`bayes_eval.tables.read_table`:
        a ;-separated CSV too, said in the pool's notes; spreadsheets refused with what to do).

        A CSV's ids are read as text (``csv_ids="text"``): integers where every id is written
        as one, else as written, so ``00017`` is not renumbered to 17.  ``"guess"``: pandas'
        own guess, as sessions created before this reading recorded it (they reopen so)."""
        from .tables import read_table

        if not os.path.exists(path):
            raise PoolError(f"pool file not found: {path}")
        id_col = kw.get("item") or "item"
        df, sep, note = read_table(path, what="pool file", dtype={id_col: str} if csv_ids == "text" else None)
        if sep is not None:   # delimited text: the ids as written, the index a frame was written with
            if csv_ids == "text" and id_col in df.columns:
                df[id_col] = _csv_ids(df[id_col])
            if len(df.columns) and str(df.columns[0]).startswith("Unnamed: 0") and "item" not in df.columns:
                df = df.set_index(df.columns[0])  # a frame written with its index: that index is the id
                df.index.name = None
        kw.setdefault("name", os.path.splitext(os.path.basename(path))[0])
        pool = cls.from_frame(df, **kw)
        return replace(pool, notes=pool.notes + (note,)) if note else pool

    @classmethod
    def from_parquet_dataset(cls, path, score_kind: str | None = None, threshold: float | None = None,
                             engine: str | None = None, scheduler: str | None = None, client=None,
                             n_classes: int = 2, name: str | None = None, classes_prior: str = "confidence",
                             frame_kw: dict | None = None):
        """A partitioned pool: a directory or glob of Parquet files, one partition per file
        in sorted order (issue 19; :mod:`bayes_eval.partitioned`).

        ``engine="memory"`` reads every partition into one :class:`Pool`; ``"dask"``
        returns a :class:`~bayes_eval.partitioned.PartitionedPool` whose columns stay on a
        Dask cluster (``client``; else the scheduler at ``scheduler``; else a local
        cluster); None chooses memory when the pool's arrays fit in a quarter of RAM.
        Either way the fingerprint is over the partitions (a changed partition changes
        it), the same under both engines, and the rows are those of the partitions
        concatenated in order, so both engines give the same session.  ``score_kind``,
        ``threshold`` and ``classes_prior`` as :meth:`from_arrays`; ``frame_kw`` the files' own
        names, as :meth:`from_frame` takes them (``score``, ``pred``, ``label``, ``item``, ``label_map``).
        """
        from dataclasses import replace

        from .partitioned import (PartitionedPool, choose_engine, combine_digests, in_partition, named_columns,
                                  partition_digest, partition_files, partition_record, read_frames)

        files = partition_files(path)
        if engine not in (None, "memory", "dask"):
            raise PoolError(f"engine must be memory or dask, got {engine!r}", cli=f"--engine must be memory or dask, "
                                                                                   f"got {engine!r}")
        why = "as asked"
        if engine is None:
            engine, why = choose_engine(files)
        if name is None:
            name = os.path.basename(os.path.normpath(path if os.path.isdir(path) else os.path.dirname(path)))
        if engine == "dask":
            pool = PartitionedPool.open(path, cls, score_kind=score_kind, threshold=threshold, n_classes=n_classes,
                                        name=name, client=client, scheduler=scheduler, classes_prior=classes_prior,
                                        frame_kw=frame_kw)
            pool.notes = pool.notes + (f"engine dask ({why}; {len(files)} partitions)",)
            return pool
        import pyarrow.parquet as pq

        sizes = [pq.ParquetFile(f).metadata.num_rows for f in files]
        try:
            pool = cls.from_frame(read_frames(files), n_classes=n_classes, name=name, score_kind=score_kind,
                                  threshold=threshold, classes_prior=classes_prior, **(frame_kw or {}))
        except PoolError as exc:   # name the partition file and its row, as the dask engine does
            raise in_partition(exc, files, sizes) from None
        named, said = named_columns(frame_kw)
        pool = replace(pool, column_names=named, notes=pool.notes + (f"engine memory ({why}; {len(files)} partitions)",)
                       + ((said,) if said else ()))
        offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        digests = [partition_digest(pool.preds[a:b], pool.scores[a:b], pool.probs[a:b], np.asarray(pool.ids)[a:b])
                   for a, b in zip(offs[:-1], offs[1:])]
        fp = combine_digests(digests, n_classes)
        pool.derived("fingerprint", None, lambda: fp, size=1)  # the partitions' fingerprint, as the dask engine's
        portable = combine_portable([array_digest(pool.preds[a:b], pool.scores[a:b], None if pool.probs_derived
                                                  else pool.probs[a:b], np.asarray(pool.ids)[a:b])
                                     for a, b in zip(offs[:-1], offs[1:])], n_classes, pool.score_kind)
        pool.derived("portable_fingerprint", None, lambda: portable, size=1)
        pool.derived("partitions", None, lambda: partition_record(files, digests), size=1)
        return pool

    # ------------------------------------------------------------------ properties
    @property
    def n_items(self) -> int:
        return int(self.preds.shape[0])

    @property
    def n_systems(self) -> int:
        return int(self.preds.shape[1])

    @property
    def uniform_weights(self) -> bool:
        return bool(np.all(self.weights == self.weights[0]))

    def features(self):
        """The :class:`bayes_eval.measures.Features` of every item (what ℓ may look at)."""
        from .measures import Features
        import jax.numpy as jnp

        return Features(preds=jnp.asarray(self.preds), scores=jnp.asarray(self.scores), probs=jnp.asarray(self.probs))

    def prior_probs(self, system: int = 0) -> np.ndarray:
        """(N, C) the classifier's own estimate s(y|x) of p(y|x) (001 §5.2)."""
        return np.asarray(self.probs[:, system, :])

    @property
    def read_options(self) -> dict:
        """How this pool's file was read (``score_kind``, ``threshold``, ``csv_ids``): what a session
        records so that reopening reads the pool the same way."""
        out = {"score_kind": self.score_kind if self.score_kind != "none" else None, "threshold": self.threshold,
               "csv_ids": "text"}
        if self.id_column is not None:
            out["id_column"] = self.id_column
        if self.column_names:
            out["columns"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.column_names}
        if self.label_names:
            out["label_map"] = dict(self.label_names)
        if self.n_classes != 2:
            out["n_classes"] = int(self.n_classes)
            out["classes_prior"] = self.classes_prior
        return out

    def strata_scores(self, system: int = 0) -> np.ndarray:
        """(N,) one system's scores on the scale the strata are built on
        (:func:`bayes_eval.scores.stratification_scale`: the score for margins and
        logits, logit(p) for probabilities, the logit of the normalized rank for ranks)."""
        return stratification_scale(np.asarray(self.scores[:, system]), self.score_kind)

    def fingerprint(self) -> str:
        """SHA-256 of the pool's content (predictions, scores, probabilities, weights, ids)."""
        h = hashlib.sha256()
        for a in (self.preds, self.scores, self.probs, self.weights):
            h.update(np.ascontiguousarray(a).tobytes())
        hash_ids(h, self.ids)
        h.update(str(self.n_classes).encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ derived values
    def derived(self, kind: str, key, build: Callable[[], Any], size: int = 4):
        """``build()``, computed once per ``(kind, key)`` and kept on this pool.

        The cache of what is derived from the pool's arrays alone -- a session's strata,
        cells and compiled design (:func:`bayes_eval.session_core.core_for`), the memoized
        :meth:`fingerprint` -- lives on the pool that owns the data (as NumPyro's ``MCMC``
        keeps its compiled functions on itself), not in a module-level cache: it goes with
        the pool.  Each ``kind`` keeps its ``size`` most recently used values; a failing
        ``build`` caches nothing.  The pool's arrays must not be changed in place once the
        pool is built (nothing in bayes_eval does).  Pickling or copying a pool leaves the
        cache behind.
        """
        return derived_value(self._derived, kind, key, build, size)

    def forget_derived(self, kind: str | None = None) -> None:
        """Drop what :meth:`derived` keeps: of one ``kind``, or everything."""
        from .derived import forget

        forget(self._derived, kind)

    @functools.cached_property
    def _derived(self) -> dict:
        return {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_derived", None)
        return state

    @functools.cached_property
    def _ids_are_rows(self) -> bool:
        """Whether the ids are the row positions 0..N-1 (checked once, in chunks)."""
        ids = self.ids
        if not np.issubdtype(ids.dtype, np.integer):
            return False
        step = 1 << 22
        return all(np.array_equal(ids[a:a + step], np.arange(a, min(a + step, ids.size)))
                   for a in range(0, ids.size, step))

    @functools.cached_property
    def _id_index(self) -> pd.Index:
        return pd.Index(self.ids)

    def index_of(self, items) -> np.ndarray:
        """Row positions of item ids; raises PoolError naming the first unknown id.

        O(len(items)) after the first call (the id index is built once per pool)."""
        items = np.asarray(items)
        if items.dtype == object and self._ids_are_rows and pd.api.types.infer_dtype(items, skipna=False) == "integer":
            # Python ints in an object array (a pandas object column): the fast path below
            # refused the int 0 as an unknown id
            items = items.astype(np.int64)
        if self._ids_are_rows:
            try:
                rows = items.astype(np.int64)
                ok = (rows.astype(items.dtype) == items) if items.dtype.kind in "iuf" else np.zeros(len(items), bool)
            except (TypeError, ValueError):
                ok = np.zeros(len(items), bool)
                rows = np.zeros(len(items), np.int64)
            ok &= (rows >= 0) & (rows < self.n_items)
            bad = _first_bad(~ok)
            if bad is not None:
                raise PoolError(f"unknown item id {_py(items[bad])!r} (row {bad} of the input)")
            return rows
        pos = self._id_index.get_indexer(items)
        bad = _first_bad(pos < 0)
        if bad is not None:
            raise PoolError(f"unknown item id {_py(items[bad])!r} (row {bad} of the input)"
                            + _zero_padded_hint(items[bad], self.ids))
        return pos.astype(np.int64)

    def true_value(self, measure) -> np.ndarray:
        """G on the fully labeled pool (requires ground-truth labels)."""
        from . import measures as M

        if self.labels is None:
            raise PoolError("this pool has no ground-truth labels")
        return np.asarray(M.value(measure, self.features(), self.labels, self.weights))

    def __repr__(self):
        lab = "with labels" if self.labels is not None else "unlabeled"
        return f"Pool({self.name!r}, {self.n_items} items, {self.n_systems} system(s), {self.n_classes} classes, {lab})"


def demo_pool(n_items: int = 50_000, positive_rate: float = 0.002, seed: int = 0) -> Pool:
    """A built-in synthetic imbalanced pool (binary, one system) with known labels.

    Scores are an SVM-like decision value: negatives ~ N(-3, 0.6), positives ~
    N(0.3, 1.2), so the classifier is good but imperfect (F1 around 0.6-0.7) and its
    ``sigmoid(score)`` is poorly calibrated, as on the entity-resolution pools of 001 §5.
    """
    rng = np.random.default_rng(seed)
    y = (rng.random(n_items) < positive_rate).astype(np.int32)
    if y.sum() == 0:
        y[0] = 1
    s = np.where(y == 1, rng.normal(0.3, 1.2, n_items), rng.normal(-3.0, 0.6, n_items))
    pred = (s >= 0).astype(np.int32)
    return Pool.from_arrays(scores=s, preds=pred, labels=y, name="demo")
