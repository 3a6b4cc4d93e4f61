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

__all__ = ["as_2d", "py_scalar", "first_bad", "check_finite", "check_labels"]


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


def check_finite(name, a, ids):
    """PoolError naming the first row of ``a`` (any shape, rows first) with a NaN or an
    infinity, and how many rows have one."""
    a2 = _rows(a)
    bad = ~np.isfinite(a2).all(axis=1)
    row = first_bad(bad)
    if row is not None:
        val = a2[row][~np.isfinite(a2[row])][0]
        raise PoolError(
            f"column {name!r}: non-finite value {val} at row {row} (item {py_scalar(ids[row])!r}); "
            f"{int(bad.sum())} row(s) affected"
        )


def check_labels(name, a, n_classes, ids):
    """``a`` (rows first) as int32 class labels in 0..n_classes-1 (integral floats and
    bools accepted); PoolError naming the first row outside the label set."""
    a2 = _rows(a)
    if not np.issubdtype(a2.dtype, np.number) and a2.dtype != bool:
        raise PoolError(f"column {name!r}: labels must be integers 0..{n_classes - 1}, got {a2.dtype}")
    af = a2.astype(np.float64)
    bad = ~(np.isfinite(af) & (af == np.round(af)) & (af >= 0) & (af < n_classes)).all(axis=1)
    row = first_bad(bad)
    if row is not None:
        v = a2[row].tolist() if a2.shape[1] > 1 else py_scalar(a2[row, 0])
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
