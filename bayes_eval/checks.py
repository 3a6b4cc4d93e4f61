"""Checks of input columns, shared by :class:`bayes_eval.pool.Pool` and
:func:`bayes_eval.measures.features_from_arrays`.

Each raises :class:`~bayes_eval.errors.PoolError` (a ``ValueError``) whose message names
the column, the first offending row and its item id.  They sit below both modules (the
pool builds :class:`~bayes_eval.measures.Features`, so ``measures`` cannot import
``pool``).
"""
from __future__ import annotations

import numpy as np

from .errors import PoolError

__all__ = ["as_2d", "py_scalar", "first_bad", "check_finite", "check_labels", "column_of", "missing_column",
           "check_label_map", "class_names_hint", "zero_padded_hint", "partial_labels_note",
           "pred_argmax_note", "rounding_step", "check_class_sums", "all_distinct", "WITHOUT_TRUTH"]

#: the words of :func:`partial_labels_note` that say a pool was read without its ground truth
WITHOUT_TRUTH = "read without its ground truth"

#: the command line's flag and the Python keyword that name each role's column (``missing_column``)
ROLE_FLAGS = {"score": ("--score-column", "score="), "pred": ("--pred-column", "pred="),
              "label": ("--label-column", "label="), "prob": ("--prob-columns", "prob="),
              "item": ("--id-column", "item="), "weight": (None, "weight=")}


def all_distinct(ids) -> bool:
    """Whether the 1-D ``ids`` (no NaN) are distinct; ``TypeError`` for ids of strings and
    numbers mixed, as ``np.unique`` raises (the caller matches those as text).  Not
    ``np.unique``: NumPy 2.4's hashes integers, and took 2.3 s for 2,000,000 distinct ids and
    10.4 s for 10^7, where sorting takes 0.03 s and 0.13 s — at every session command, which
    reads the pool again; ids as Python objects go through pandas' hash table (0.5 s against 3.0 s)."""
    a = np.asarray(ids)
    if a.dtype.kind in "biufUS":
        s = np.sort(a)
        return bool((s[1:] != s[:-1]).all())
    if a.dtype.kind == "O":
        import pandas as pd

        if pd.api.types.infer_dtype(a, skipna=False) in ("mixed", "mixed-integer"):
            raise TypeError("ids of mixed types")
        return bool(pd.Series(a).is_unique)
    return bool(np.unique(a).size == a.size)


def as_2d(name, a, n=None):
    """``a`` as a 2-D array (a 1-D one becomes one column); PoolError for other shapes
    or, given ``n``, for a row count other than ``n``."""
    a = np.asarray(a)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise PoolError(f"column {name!r}: expected a 1-D or 2-D array, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise PoolError(
            f"column {name!r}: has {a.shape[0]} rows but the pool has {n} items (mismatched lengths)"
        )
    return a


def py_scalar(v):
    """numpy scalar -> Python scalar, for readable error messages."""
    return v.item() if isinstance(v, np.generic) else v


def first_bad(mask):
    """The first row where ``mask`` is true, or None."""
    idx = np.flatnonzero(mask)
    return int(idx[0]) if idx.size else None


def _rows(a):
    """``a`` (rows first) as a 2-D array, one row per item (an empty ``a`` included)."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


def column_of(name, columns, bad_in_row):
    """The user's name of the column of the first true entry of ``bad_in_row`` (one row's
    mask over the columns a role was read from): ``columns[j]`` where ``columns`` (the
    file's column names, in order) has one per entry, its one name where it has one, else
    ``name`` (the role, or the name it was given)."""
    if columns is None or isinstance(columns, str):
        return name if columns is None else columns
    columns = list(columns)
    if len(columns) == 1:
        return columns[0]
    j = first_bad(np.asarray(bad_in_row).reshape(-1))
    return columns[j] if j is not None and len(columns) == np.asarray(bad_in_row).size else name


def check_finite(name, a, ids, columns=None):
    """PoolError naming the first row of ``a`` (any shape, rows first) with a NaN or an
    infinity, and how many rows have one; ``columns``: the user's names of ``a``'s columns
    (:func:`column_of`), so that the message names the column the value is in."""
    a2 = _rows(a)
    bad = ~np.isfinite(a2).all(axis=1)
    row = first_bad(bad)
    if row is not None:
        val = a2[row][~np.isfinite(a2[row])][0]
        raise PoolError(
            f"column {column_of(name, columns, ~np.isfinite(a2[row]))!r}: non-finite value {val} at row {row} "
            f"(item {py_scalar(ids[row])!r}); {int(bad.sum())} row(s) affected"
        )


def check_labels(name, a, n_classes, ids, columns=None):
    """``a`` (rows first) as int32 class labels in 0..n_classes-1 (integral floats and
    bools accepted); PoolError naming the first row outside the label set (its column as
    :func:`check_finite`)."""
    a2 = _rows(a)
    if not np.issubdtype(a2.dtype, np.number) and a2.dtype != bool:
        raise PoolError(f"column {name!r}: labels must be integers 0..{n_classes - 1}, got {a2.dtype}")
    af = a2.astype(np.float64)
    bad = ~(np.isfinite(af) & (af == np.round(af)) & (af >= 0) & (af < n_classes)).all(axis=1)
    row = first_bad(bad)
    if row is not None:
        ok = np.isfinite(af[row]) & (af[row] == np.round(af[row])) & (af[row] >= 0) & (af[row] < n_classes)
        name = column_of(name, columns, ~ok)
        one = a2.shape[1] == 1 or (columns is not None and not isinstance(columns, str) and len(columns) == a2.shape[1])
        v = py_scalar(a2[row, first_bad(~ok)]) if one else a2[row].tolist()
        if isinstance(v, float) and v.is_integer():   # a label column read as floats (a missing value elsewhere)
            v = int(v)
        msg = (f"column {name!r}: value {v!r} at row {row} "
               f"(item {py_scalar(ids[row])!r}) is outside the label set {{0..{n_classes - 1}}}")
        big = af[np.isfinite(af) & (af == np.round(af)) & (af >= n_classes)]
        if big.size:   # whole classes past the set: a pool of more classes, read as binary?
            k = int(big.max()) + 1
            raise PoolError(msg + f" (a pool of {k} classes: n_classes={k})",
                            cli=msg + f" (a pool of {k} classes: --classes {k})")
        raise PoolError(msg)
    return a2.astype(np.int32)


def refuse_short_csv_rows(path: str, sep: str, frame) -> None:
    """A CSV row with fewer fields than its header reads as missing values (NaN) in pandas,
    and would be refused as a non-finite score: name the short row instead.  Run only when
    ``frame`` (pandas' reading of ``path``) has a missing value, so a clean file is read
    once; said only where the file's records line up one to one with the frame's rows and
    the short row's missing fields are missing in the frame (else the frame's own checks
    speak).  A bare carriage return in a field ends a record for pandas as for the csv
    module (and pandas writes it unquoted): that is a row cut short too."""
    import csv

    short, n = None, 0
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh, delimiter=sep)
        header = next(rows, [])
        for row in rows:
            if not row:
                continue
            if short is None and len(row) < len(header):
                short = (n, rows.line_num, len(row))
            n += 1
    if short is None or n != len(frame):
        return
    k, line, m = short
    cut = [c for c in header[m:] if c in frame.columns]
    if cut and frame[cut].iloc[k].isna().all():
        raise PoolError(f"{path}: line {line} has {m} of the header's {len(header)} columns "
                        f"({', '.join(header)}): a row cut short")


def missing_column(column, role, columns) -> PoolError:
    """The error for a column named for ``role`` (``"score"``, ``"item"``, ...) that the pool
    does not have: naming the flag or keyword that named it, the pool's columns and the
    closest of them where one is close (a typo: ``pairid`` for ``pair_id``)."""
    import difflib

    cols = [str(c) for c in columns]
    close = difflib.get_close_matches(str(column), cols, n=1, cutoff=0.6)
    if not close:   # a case or separator slip difflib scores low: PairID, pair-id
        key = str(column).lower().replace("-", "").replace("_", "").replace(" ", "")
        close = [c for c in cols if c.lower().replace("-", "").replace("_", "").replace(" ", "") == key][:1]
    hint = f"; did you mean {close[0]!r}?" if close else ""
    flag, kw = ROLE_FLAGS.get(role, (None, f"{role}="))
    found = f"column {column!r} not found; columns are {cols}{hint}"
    return PoolError(f"{kw}{column!r}: {found}", cli=f"{flag} {column}: {found}" if flag else None)


def check_label_map(label_map, n_classes, shared: bool = True) -> None:
    """Refuse a label map ({name: class}) that cannot be what was meant: a class outside
    0..n_classes-1 (the map, or ``n_classes``, is wrong: both are named), or names sharing a
    class while another class has no name (a typo: ``fish=2`` for ``fish=3``).  Synonyms
    (``yes=1,y=1,no=0``) are fine: every class has a name.  ``shared=False``: the first check only
    (a pool's reading: sessions created before the second reopen)."""
    if not label_map:
        return
    out = {k: int(v) for k, v in label_map.items() if not 0 <= int(v) < n_classes}
    if out:
        k, v = next(iter(out.items()))
        k_max = max(out.values()) + 1
        msg = (f"MAP gives {k}={v}, outside the classes 0..{n_classes - 1} of a pool of {n_classes} classes: fix MAP "
               f"(classes are numbered from 0), or give CLASSES{k_max} if the pool has {k_max} classes")
        raise PoolError(msg.replace("MAP", "the label map").replace("CLASSES", "n_classes="),
                        cli=msg.replace("MAP", "--label-map").replace("CLASSES", "--classes "))
    by_class = {}
    for k, v in (label_map.items() if shared else ()):
        by_class.setdefault(int(v), []).append(str(k))
    unnamed = [c for c in range(n_classes) if c not in by_class]
    same = [(c, names) for c, names in sorted(by_class.items()) if len(names) > 1]
    if unnamed and same:
        c, names = same[0]
        which = " and ".join(repr(n) for n in names)
        nobody = ", ".join(map(str, unnamed))
        msg = (f" gives {which} the same class {c} while class{'es' if len(unnamed) > 1 else ''} {nobody} "
               f"{'have' if len(unnamed) > 1 else 'has'} no name: give each class its own number 0..{n_classes - 1}")
        raise PoolError("the label map" + msg, cli="--label-map" + msg)


def class_names_hint(values, limit: int = 20) -> str:
    """``--label-map`` with a ``NAME=?`` for each class name in ``values`` (in order of first
    appearance), up to ``limit`` and how many more: what a pool of class names needs."""
    import pandas as pd

    names = [str(v) for v in pd.unique(pd.Series(values).dropna().astype(str))]
    more = f" (and {len(names) - limit} more names)" if len(names) > limit else ""
    return "--label-map " + ",".join(f"{v}=?" for v in names[:limit]) + more


def zero_padded_hint(item, pool_ids) -> str:
    """A hint for an unknown item id that is a pool id without its leading zeros (``554`` for
    ``00554``: a spreadsheet read the ids as numbers): ``'; the pool's ids are zero-padded,
    e.g. '00554': ...'``, else ''.  ``pool_ids``: the pool's ids (a partitioned pool's lazy
    ones are not searched)."""
    if getattr(pool_ids, "lazy", False) or np.asarray(pool_ids).dtype.kind in "biuf":   # numbers: no zeros to lose
        return ""
    v = py_scalar(item)
    if isinstance(v, float) and np.isfinite(v) and v == int(v):
        v = int(v)
    key = str(v).strip()
    if not key.isdigit():
        return ""
    import pandas as pd

    ids = pd.Series(np.asarray(pool_ids, dtype=object)).astype(str)
    padded = ids[ids.str.fullmatch(r"0+[0-9]+") & (ids.str.lstrip("0").replace("", "0") == (key.lstrip("0") or "0"))]
    if not len(padded):
        return ""
    return (f"; the pool's ids are zero-padded, e.g. {padded.iloc[0]!r}: was the file opened in a spreadsheet? "
            f"Keep the ids as text (as the batch file wrote them)")


def partial_labels_note(column, labels) -> str:
    """The pool's note for a ground-truth column with missing values (NaN in ``labels``),
    which the pool is read without: how many are missing, and who would have needed it."""
    miss = np.isnan(np.asarray(labels, dtype=np.float64).reshape(len(labels), -1)).any(axis=1)
    return (f"column {column!r} has {int(miss.sum()):,} of {miss.size:,} labels missing (first at row {first_bad(miss)}): "
            f"the pool is {WITHOUT_TRUTH} (a session never uses it; a simulation's oracle needs every item's label)")


def pred_argmax_note(preds, probs, ids, column="pred"):
    """A note where the given predictions (N, S) are not the top class of the class
    probabilities (N, S, C) on some rows (a tie counts as agreeing), else None: the measures
    read the predictions while the prior and the model's split read the probabilities, so
    the two disagreeing often means columns out of class order or a label map off."""
    preds = np.asarray(preds, np.int64)
    probs = np.asarray(probs, np.float64)
    at_pred = np.take_along_axis(probs, preds[..., None], axis=-1)[..., 0]
    off = (at_pred < probs.max(-1) - 1e-12).any(axis=1)
    if not off.any():
        return None
    r = first_bad(off)
    return (f"column {column!r} disagrees with the top class of the class probabilities on {int(off.sum()):,} of "
            f"{off.size:,} rows (first: row {r}, item {py_scalar(ids[r])!r}: pred {int(preds[r, 0])}, top class "
            f"{int(probs[r, 0].argmax())}): the measures read the predictions, the model the probabilities' top class; "
            f"check that the probability columns are in class order 0..C-1 and match the label map")


def rounding_step(values, max_decimals: int = 6) -> float | None:
    """10⁻ᵈ for the fewest decimals d ≤ ``max_decimals`` that every value is written with (a
    file's probabilities rounded to two decimals: 0.01), else None (not rounded)."""
    v = np.asarray(values, np.float64).ravel()
    for d in range(max_decimals + 1):
        scaled = v * 10.0 ** d
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-6 * np.maximum(1.0, np.abs(scaled))):
            return 10.0 ** -d
    return None


def check_class_sums(name, probs, ids, n_classes: int):
    """PoolError where an item's class probabilities (N, S, C) do not sum to 1 within what rounding
    explains: 0.01, or C × half the rounding step where the values are written with few decimals
    (three classes rounded to two decimals sum to anything in [0.985, 1.015]; stop 79: a row of
    0.99 was refused, its 0.01 off read as over 0.01 by round-off).  Returns a note for rows
    accepted off 1 by more than 1e-6 (the probabilities are used as given), else None."""
    probs = np.asarray(probs, np.float64)
    tot = probs.sum(-1).reshape(len(probs), -1)
    off = np.abs(tot - 1.0)
    far = (off > 0.01 + 1e-9).any(axis=1)
    # the file's rounding step, from evenly spaced rows (at most 100,000: cheap on a pool of 10^8 items);
    # a row whose own values happen to be coarser (0.5, 0.2, 0.2) gets no more allowance than its file's
    step = rounding_step(probs[::max(1, len(probs) // 100_000)]) if far.any() else None
    tol = max(0.01, 0.5 * n_classes * (step or 0.0)) + 1e-9
    r = first_bad((off > tol).any(axis=1))
    if r is not None:
        why = f"rounding to {step:g} explains ±{tol:.3g}" if step and tol > 0.01 + 1e-9 else "±0.01 is allowed"
        raise PoolError(f"column {name!r}: the class probabilities at row {r} (item {py_scalar(ids[r])!r}) "
                        f"sum to {float(tot[r][np.argmax(off[r])]):.6g}, not 1 ({why}): give the classifier's probability of "
                        f"each of the {n_classes} classes (softmax outputs, not scores or margins)")
    if off.max() > 1e-6:
        return (f"class probabilities sum to {float(tot.min()):.4g}-{float(tot.max()):.4g} on some rows "
                f"({int((off > 1e-6).any(axis=1).sum()):,} of {len(tot):,}; rounded in the file): used as given")
    return None
