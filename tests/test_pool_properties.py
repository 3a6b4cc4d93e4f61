"""Property test over pool frames (issue 14, last bullet).

Hypothesis builds DataFrames as users have them -- a random subset of the columns
{item, score, pred, prob, label, weight, text}, each in a random dtype (float64, float32,
int64, bool, object, strings, nullable Int64/Float64, category), ids of every kind (row
numbers, integers from 1000 or random, strings, mixed ints and strings, floats,
duplicates, missing), tied and few-valued scores, extreme finite values, NaN/±inf/None
and non-numeric strings at random rows, probabilities in and out of [0, 1], labels and
predictions outside {0, 1}, empty and one-row frames, and random ``score_kind`` /
``threshold`` / ``prob`` / ``weight`` / ``item`` arguments -- and reads some of them back
from CSV and Parquet files (``Pool.from_file`` and ``registry.load_pool``).

The property: :meth:`Pool.from_frame` either returns a pool that satisfies the pool's
invariants, or raises :class:`PoolError` whose message names the problem (the column, or
the argument) in plain values.  Any other exception is a failure.  The generator also
knows which frames are valid: a valid frame must give a pool, and a frame with a defect
(a NaN score, a duplicate id, a missing ``pred`` without ``threshold``...) must give an
error; dtypes whose reading is a matter of taste (numbers written as strings,
categoricals) may give either.
"""
from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import note as _hypothesis_note
from hypothesis.errors import InvalidArgument
from hypothesis import strategies as st

from bayes_eval.errors import PoolError
from bayes_eval.pool import Pool, PoolWarning
from bayes_eval.registry import load_pool
from bayes_eval.scores import SCORE_KINDS
from bayes_eval.strata import stratify

NAN, INF = float("nan"), float("inf")
COLUMNS = ("item", "score", "pred", "prob", "label", "weight", "text")


def _missing(v):
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def _finite_numbers(vals):
    return [float(v) for v in vals if not _missing(v) and not isinstance(v, str) and math.isfinite(float(v))]


class Case:
    """One generated frame, the arguments it is read with, and what is wrong with it.

    ``hard``: defects that must give a PoolError; ``soft``: readings that may go either
    way.  Each is a list of (topic, what): the error message must mention one topic."""

    def __init__(self):
        self.columns = {}
        self.hard = []
        self.soft = []
        self.kw = {}
        self.via = "frame"
        self.index_kind = "default"

    def __repr__(self):
        return f"Case(via={self.via}, kw={self.kw}, hard={self.hard}, soft={self.soft}, index={self.index_kind})"


def note(text):
    """hypothesis.note inside the property test; nothing in the plain tests below."""
    try:
        _hypothesis_note(text)
    except InvalidArgument:
        pass


# ------------------------------------------------------------------ columns
def _dtype_options(vals, allow_bool=True):
    """The dtypes a column with these values can be written in without changing them
    (float64 first and most often)."""
    if any(isinstance(v, str) for v in vals):
        return ["object", "category"]
    has_missing = any(_missing(v) for v in vals)
    nums = [float(v) for v in vals if not _missing(v)]
    finite = all(math.isfinite(v) for v in nums)
    opts = ["float64", "float64", "float64", "object", "str", "category", "Float64"]
    if not has_missing and finite and all(v == 0 or 1e-37 < abs(v) < 3e38 for v in nums):
        opts.append("float32")
    integral = finite and all(v.is_integer() and abs(v) < 2 ** 53 for v in nums)
    if integral:
        opts += ["Int64", "int64"] if not has_missing else ["Int64"]
    if allow_bool and integral and not has_missing and all(v in (0.0, 1.0) for v in nums):
        opts.append("bool")
    return opts


def _make_series(vals, dtype):
    if dtype == "object":
        return pd.Series(list(vals), dtype=object)
    if dtype == "str":  # numbers written as text, as a spreadsheet export may have them
        return pd.Series([None if _missing(v) else str(v) for v in vals])
    if dtype == "category":
        return pd.Series(pd.Categorical(list(vals)))
    if dtype in ("int64", "Int64"):
        return pd.Series([None if _missing(v) else int(v) for v in vals], dtype=dtype)
    if dtype == "bool":
        return pd.Series([bool(v) for v in vals], dtype=bool)
    if dtype in ("float64", "float32"):  # numpy floats hold a missing value as NaN
        vals = [NAN if v is pd.NA else v for v in vals]
    return pd.Series(list(vals), dtype=dtype)


def _place(draw, vals, specials):
    """Some rows of ``vals`` replaced by specials; the rows replaced."""
    n = len(vals)
    if n == 0 or not draw(st.sampled_from([False] * 5 + [True])):
        return list(vals), set()
    rows = draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=min(n, 3)))
    vals = list(vals)
    for r in sorted(rows):
        vals[r] = draw(st.sampled_from(specials))
    return vals, rows


def _numeric_column(draw, case, name, vals, specials, allow_bool=True):
    """A numeric column: specials placed at random rows, then a dtype that keeps the
    values; the defects recorded in ``case``."""
    vals, rows = _place(draw, vals, specials)
    # (float32 would round a special such as 1 + 1e-9 away)
    dtype = draw(st.sampled_from([d for d in _dtype_options(vals, allow_bool) if not (rows and d == "float32")]))
    case.columns[name] = (_make_series(vals, dtype), dtype, rows, vals)


def _flaws_of(case, name, used, valid):
    """Record the defects of column ``name`` (read by the pool when ``used``); ``valid``
    says whether a finite number is acceptable in it."""
    if name not in case.columns or not used:
        return
    series, dtype, rows, vals = case.columns[name]
    if name == "label":   # missing labels: the pool is read without its ground truth (a note); the rest checked
        vals = [v for v in vals if not _missing(v)]
    bad = [v for v in vals if _missing(v) or isinstance(v, str) or not math.isfinite(float(v)) or not valid(float(v))]
    if bad:
        case.hard.append((name, f"bad values {bad[:3]!r}"))
    elif dtype in ("str", "category"):
        case.soft.append((name, f"numbers as {dtype}"))


fl = lambda lo, hi: st.floats(lo, hi, allow_nan=False, allow_infinity=False)  # noqa: E731


def _score_values(draw, n):
    kind = draw(st.sampled_from(["margin", "margin", "prob", "prob", "prob01", "rank1", "rank0", "tied", "few",
                                 "int", "extreme"]))
    size = dict(min_size=n, max_size=n)
    if kind == "margin":
        return kind, draw(st.lists(fl(-30, 30), **size))
    if kind == "prob":
        return kind, draw(st.lists(fl(0, 1), **size))
    if kind == "prob01":
        return kind, draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 1e-12, 1 - 1e-12]), **size))
    if kind in ("rank0", "rank1"):
        return kind, [r + (kind == "rank1") for r in draw(st.permutations(range(n)))]
    if kind == "tied":
        return kind, [draw(st.sampled_from([0.0, 0.5, 1.0, -3.0, 7, 2.5]))] * n
    if kind == "few":
        choices = draw(st.lists(fl(-5, 5), min_size=1, max_size=3))
        return kind, draw(st.lists(st.sampled_from(choices), **size))
    if kind == "int":
        return kind, draw(st.lists(st.integers(-5, 5), **size))
    return kind, draw(st.lists(st.sampled_from(
        [1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 1e-300, 0.0, 1.0, -1.0]), **size))


def _class_values(draw, n):
    if draw(st.booleans()):
        return [draw(st.sampled_from([0, 1]))] * n  # one predicted class
    return draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n))


def _ids(draw, n):
    """(kind, values, defect) of an id column."""
    kind = draw(st.sampled_from(["range0", "offset", "offset", "randint", "str", "str", "str", "mixed", "mixed",
                                 "float", "dup", "missing"]))
    size = dict(min_size=n, max_size=n)
    base_kind = kind if kind not in ("dup", "missing") else draw(st.sampled_from(["offset", "str", "randint"]))
    if base_kind == "range0":
        vals = list(range(n))
    elif base_kind == "offset":
        vals = list(range(1000, 1000 + n))
    elif base_kind == "randint":
        vals = draw(st.lists(st.integers(-10 ** 12, 10 ** 12), unique=True, **size))
    elif base_kind == "str":
        vals = draw(st.lists(st.text(max_size=6), unique=True, **size))
    elif base_kind == "mixed":
        vals = draw(st.lists(st.one_of(st.integers(-5, 50), st.text(max_size=3)),
                             unique_by=lambda v: (type(v).__name__, v), **size))
    else:
        vals = draw(st.lists(fl(-1e6, 1e6), unique=True, **size))
    defect = None
    if kind == "dup" and n >= 2:
        a, b = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
        vals[b] = vals[a]
        defect = "duplicate id"
    elif kind == "missing" and n >= 1:
        vals[draw(st.integers(0, n - 1))] = draw(st.sampled_from([None, NAN]))
        defect = "missing id"
    if any(isinstance(v, str) for v in vals):
        opts = ["object", "str", "category"]
    elif any(_missing(v) for v in vals):
        opts = ["object", "float64"] + (["Int64"] if base_kind != "float" else [])
    elif base_kind == "float":
        opts = ["float64", "object"]
    else:
        opts = ["int64", "int64", "Int64", "object", "category"]
    dtype = draw(st.sampled_from(opts))
    if defect is None and len({str(v) for v in vals}) < n and (dtype == "str" or base_kind == "mixed"):
        # ids of mixed types are matched as text (sessions, label files): 0 and "0" collide
        defect = "duplicate id (as text)"
    if dtype == "str":
        series = pd.Series([None if _missing(v) else str(v) for v in vals])
    elif dtype == "category":
        series = pd.Series(pd.Categorical(vals))
    elif dtype == "Int64":
        series = pd.Series([None if _missing(v) else int(v) for v in vals], dtype="Int64")
    else:
        series = pd.Series(vals, dtype=dtype)
    return kind, series, defect


@st.composite
def cases(draw):
    case = Case()
    n = draw(st.sampled_from([0, 1, 1, 2, 3, 5, 5, 8, 8, 8, 20, 20, 40, 40]))
    present = {
        "score": draw(st.sampled_from([True] * 4 + [False])),
        "pred": draw(st.sampled_from([True] * 5 + [False])),
        "prob": draw(st.sampled_from([True, False, False])),
        "label": draw(st.booleans()),
        "weight": draw(st.sampled_from([True, False, False])),
        "item": draw(st.booleans()),
        "text": draw(st.sampled_from([True, False, False])),
    }
    if present["score"]:
        _, vals = _score_values(draw, n)
        _numeric_column(draw, case, "score", vals, [NAN, INF, -INF, None, pd.NA, "abc"])
    for c in ("pred", "label"):
        if present[c]:
            _numeric_column(draw, case, c, _class_values(draw, n), [2, -1, 0.5, NAN, None, pd.NA, INF, "yes", 3.0])
    if present["prob"]:
        vals = draw(st.one_of(st.lists(fl(0, 1), min_size=n, max_size=n),
                              st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=n, max_size=n)))
        _numeric_column(draw, case, "prob", vals, [1.5, -0.1, 1 + 1e-9, NAN, INF, None, "abc"])
    if present["weight"]:
        vals = draw(st.one_of(st.lists(fl(1e-3, 1e3), min_size=n, max_size=n),
                              st.lists(st.sampled_from([1e-300, 5e-324, 1.0, 1e300, 1e308]), min_size=n, max_size=n)))
        _numeric_column(draw, case, "weight", vals, [0.0, -1.0, NAN, INF, None, "abc"])
    if present["text"]:
        vals = draw(st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=n, max_size=n))
        case.columns["text"] = (pd.Series(vals, dtype=object), "object", set(), vals)
    id_defect = None
    if present["item"]:
        kind, series, id_defect = _ids(draw, n)
        case.columns["item"] = (series, kind, set(), series.tolist())
    # the frame, its columns in a random order, its index
    order = draw(st.permutations(sorted(case.columns)))
    df = pd.DataFrame({c: case.columns[c][0] for c in order}, index=pd.RangeIndex(n))
    case.index_kind = draw(st.sampled_from(["default"] * 3 + ["offset", "offset", "str", "str", "dup"]))
    if case.index_kind == "offset":
        df.index = pd.Index(range(500, 500 + n))
    elif case.index_kind == "str":
        df.index = pd.Index([f"row-{i}" for i in range(n)], dtype=object)
    elif case.index_kind == "dup" and n >= 2:
        df.index = pd.Index([7] * n)
    else:
        case.index_kind = "default"
    # the arguments
    kw = {}
    for c in ("prob", "weight"):
        if draw(st.sampled_from([False, False, True] if present[c] else [False] * 7 + [True])):
            kw[c] = c
    if draw(st.sampled_from([False, False, True] if present["item"] else [False] * 9 + [True])):
        kw["item"] = "item"
    for c in ("score", "label"):  # a column there but not to be read
        if present[c] and draw(st.sampled_from([False] * 7 + [True])):
            kw[c] = None
    kw["score_kind"] = draw(st.sampled_from([None] * 8 + ["auto", "margin", "probability", "logit", "rank", "bogus"]))
    if present["pred"]:  # a threshold is for a pool without predictions
        kw["threshold"] = draw(st.sampled_from([None] * 12 + [0.5, NAN, "x"]))
    else:
        kw["threshold"] = draw(st.sampled_from([None, 0.0, 0.5, 0.5, 0.5, NAN, INF, "x"]))
    case.kw = kw
    case.via = draw(st.sampled_from(["frame"] * 5 + ["csv", "parquet", "load_pool"]))
    _classify(case, df, n, id_defect)
    return case, df


def _classify(case, df, n, id_defect):
    """What is wrong with the frame under ``case.kw`` (``case.hard`` / ``case.soft``)."""
    kw = case.kw
    hard = case.hard
    uses = {c: c in df.columns and kw.get(c, c) is not None for c in ("score", "pred", "label", "item")}
    for c in ("prob", "weight"):
        uses[c] = c in kw and c in df.columns
        if c in kw and c not in df.columns:
            hard.append((c, "named but absent"))
    if kw.get("item") and "item" not in df.columns:
        hard.append(("item", "named but absent"))
    if n == 0:
        hard.append(("empty", "0 rows"))
    _flaws_of(case, "score", uses["score"], lambda v: True)
    _flaws_of(case, "pred", uses["pred"], lambda v: v in (0.0, 1.0))
    _flaws_of(case, "label", uses["label"], lambda v: v in (0.0, 1.0))
    _flaws_of(case, "prob", uses["prob"], lambda v: 0.0 <= v <= 1.0)
    _flaws_of(case, "weight", uses["weight"], lambda v: v > 0)
    if uses["weight"] and not any(t == "weight" for t, _ in hard):
        w = _finite_numbers(case.columns["weight"][3])
        if w and max(w) / min(w) > 1e300:  # the smallest is 0 next to the largest in float64
            case.soft.append(("weight", "weights spanning more than 1e300"))
    if uses["item"] and id_defect:
        hard.append(("item", id_defect))
    if not uses["item"] and case.index_kind == "dup":
        hard.append(("item", "duplicate index"))
    if not (uses["score"] or uses["pred"] or uses["prob"]):
        hard.append(("column", "no score, pred or prob"))
    sk, thr = kw["score_kind"], kw["threshold"]
    if sk == "bogus":
        hard.append(("score kind", "unknown"))
    if uses["score"] and sk == "probability":
        vals = case.columns["score"][3]
        if any(not 0.0 <= v <= 1.0 for v in _finite_numbers(vals)):
            hard.append(("score", "score kind probability, values outside [0, 1]"))
    if not uses["score"] and uses["prob"] and sk not in (None, "auto", "probability"):
        hard.append(("score kind", "given without a score column"))
    if thr is not None and not (isinstance(thr, float) and math.isfinite(thr)):
        hard.append(("threshold", f"bad threshold {thr!r}"))
    if thr is not None and uses["pred"]:
        hard.append(("threshold", "threshold and a pred column"))
    if not uses["pred"] and thr is None:
        hard.append(("threshold=", "pred missing"))


# ------------------------------------------------------------------ reading
def _read_back(path):
    """The frame ``Pool.from_file`` reads (a CSV written with its index: that index)."""
    if path.endswith(".parquet"):
        return pd.read_parquet(path)
    df = pd.read_csv(path)
    if len(df.columns) and str(df.columns[0]).startswith("Unnamed: 0") and "item" not in df.columns:
        df = df.set_index(df.columns[0])
        df.index.name = None
    return df


def _build(case, df, tmpdir):
    """Pool.from_frame / from_file / load_pool on the case; the frame as the pool read it."""
    kw = dict(case.kw)
    via = case.via
    if via == "frame" or len(df.columns) == 0:
        case.via = "frame"
        return Pool.from_frame(df, **kw), df
    use_csv = via == "csv" or (via == "load_pool" and len(df) % 2 == 0)
    path = os.path.join(tmpdir, "pool.csv" if use_csv else "pool.parquet")
    try:
        if use_csv:
            df.to_csv(path, index=not ("item" in df.columns) and case.index_kind != "default")
        else:
            df.to_parquet(path)
    except Exception:  # pyarrow cannot write mixed-type object columns: read the frame instead
        case.via = "frame"
        return Pool.from_frame(df, **kw), df
    read = _read_back(path)
    case.via = f"{via} ({'csv' if use_csv else 'parquet'})"
    if use_csv:
        # CSV changes what it stores (numbers as text, "" as missing, "1" and "01" alike):
        # a valid frame may become an invalid file, so only the defects are checked
        case.soft.append(("csv", "round trip"))
    if via == "load_pool" and set(kw) - {"score_kind", "threshold"} == set():
        return load_pool(path, score_kind=kw["score_kind"], threshold=kw["threshold"]), read
    return Pool.from_file(path, **kw), read


# ------------------------------------------------------------------ checks
_NP_REPR = re.compile(r"\bnp\.[A-Za-z_0-9]+\(|np\.(True|False)_")


def _check_error(case, df, exc):
    msg = str(exc)
    note(f"PoolError: {msg}")
    assert not _NP_REPR.search(msg), f"numpy scalar repr in the message: {msg}"
    if "csv" in case.via and not case.hard:
        return  # the file may differ from the frame (see _build)
    assert case.hard or case.soft, f"a valid frame was refused: {msg}"
    topics = [t for t, _ in case.hard + case.soft]
    low = msg.lower()
    words = {"empty": ["empty"], "column": ["column"], "score kind": ["score kind", "score_kind"],
             "threshold": ["threshold"], "threshold=": ["threshold="], "csv": ["column", "could not read"],
             "item": ["'item'", " id", "index"]}
    assert any(w in low for t in topics for w in words.get(t, [f"'{t}'"])), \
        f"the message names none of {topics}: {msg}"
    if [t for t, _ in case.hard] == ["threshold="] and "csv" not in case.via:  # pred missing is the only defect
        assert "threshold=" in msg, msg
    m = re.search(r"at row (\d+)", msg)
    if m and "id " not in msg:
        row = int(m.group(1))
        assert "(item " in msg, f"a bad value's message does not name the item: {msg}"
        if "csv" not in case.via:  # (a CSV may have other rows: an id "\r" ends a line)
            assert 0 <= row < len(df), msg
            item = _ids_given(df, case.kw).tolist()[row]
            named = ["(item nan)", "(item None)"] if _missing(item) else [f"(item {item!r})"]
            assert any(x in msg for x in named), f"row {row} is item {item!r}: {msg}"


def _ids_given(pool_df, kw):
    if kw.get("item") or "item" in pool_df.columns:
        return pool_df["item"]
    return pool_df.index.to_series()


def _floats(series):
    return np.array([float(v) for v in series.tolist()], dtype=np.float64)


def _check_pool(case, df, pool, caught):
    n = len(df)
    kw = case.kw
    assert pool.n_items == n
    # ids: as given, unique, found again by index_of
    given = _ids_given(df, kw)
    got = pool.ids.tolist()
    assert got == given.tolist(), (got, given.tolist())
    assert [type(a) for a in got] == [type(b) for b in given.tolist()], "ids changed type"
    assert pd.Index(pool.ids).is_unique
    np.testing.assert_array_equal(pool.index_of(pool.ids), np.arange(n))
    np.testing.assert_array_equal(pool.index_of(given.to_numpy()), np.arange(n))
    # predictions
    preds = np.asarray(pool.preds)
    assert preds.shape == (n, 1) and set(np.unique(preds)) <= {0, 1}
    scores = np.asarray(pool.scores)
    assert scores.shape == (n, 1) and np.isfinite(scores).all()
    if "pred" in df.columns:
        np.testing.assert_array_equal(preds[:, 0], _floats(df["pred"]))
    else:
        assert pool.threshold == kw["threshold"]
        np.testing.assert_array_equal(preds[:, 0], scores[:, 0] >= kw["threshold"])
    uses_prob = "prob" in kw
    if "score" in df.columns and kw.get("score", "score") is not None:
        np.testing.assert_array_equal(scores[:, 0], _floats(df["score"]))
        if kw["score_kind"] in SCORE_KINDS:
            assert pool.score_kind == kw["score_kind"]
        elif ((scores >= 0) & (scores <= 1)).all():
            assert pool.score_kind == "probability"
    elif uses_prob:
        np.testing.assert_array_equal(scores[:, 0], _floats(df["prob"]))
        assert pool.score_kind == "probability"
    else:
        assert pool.score_kind == "none"
    # probabilities: finite, in [0, 1], summing to one; the prior of probability scores is the score
    probs = np.asarray(pool.probs)
    assert probs.shape == (n, 1, 2) and np.isfinite(probs).all()
    assert ((probs >= 0) & (probs <= 1)).all()
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=0, atol=1e-12)
    if uses_prob:
        np.testing.assert_array_equal(probs[:, 0, 1], _floats(df["prob"]))
    elif pool.score_kind == "probability":
        np.testing.assert_array_equal(probs[:, 0, 1], scores[:, 0])
    # labels and weights
    if "label" in df.columns and kw.get("label", "label") is not None and df["label"].isna().any():
        assert pool.labels is None and any("labels missing" in n for n in pool.notes), pool.notes
    elif "label" in df.columns and kw.get("label", "label") is not None:
        np.testing.assert_array_equal(pool.labels, _floats(df["label"]))
    else:
        assert pool.labels is None
    w = np.asarray(pool.weights)
    assert w.shape == (n,) and np.isfinite(w).all() and (w > 0).all()
    np.testing.assert_allclose(w.sum(), 1.0, rtol=1e-12)
    if "weight" in kw:
        given_w = _floats(df["weight"])
        np.testing.assert_allclose(w / w.max(), given_w / given_w.max(), rtol=1e-12)
    # the warning for a pool without scores, and no other warning
    pool_warnings = [x for x in caught if issubclass(x.category, PoolWarning)]
    assert bool(pool_warnings) == (pool.score_kind == "none"), [str(x.message) for x in pool_warnings]
    # strata: a partition into at most 16 score-ordered blocks; no stratum holds both
    # predicted classes unless its scores separate them
    z = pool.strata_scores(0)
    assert z.shape == (n,) and np.isfinite(z).all()
    strata = stratify(pool, 16)
    assert strata.index.shape == (n,) and 1 <= strata.n_strata <= 16
    assert (strata.sizes > 0).all() and strata.sizes.sum() == n
    np.testing.assert_array_equal(np.bincount(strata.index, minlength=strata.n_strata), strata.sizes)
    assert np.isfinite(strata.lower).all() and np.isfinite(strata.upper).all()
    assert (strata.lower <= strata.upper).all()
    pred = preds[:, 0]
    for k in range(strata.n_strata):
        neg = (strata.index == k) & (pred == 0)
        pos = (strata.index == k) & (pred == 1)
        if neg.any() and pos.any():
            assert z[neg].max() < z[pos].min(), f"stratum {k} mixes predicted classes its scores cannot separate"


def _check_case(case, df, tmpdir):
    """The property for one case: a correct pool or a PoolError naming the problem, no
    other exception, no warning but PoolWarning.  Returns the pool or None."""
    note(repr(case))
    note(f"frame:\n{df!r}\ndtypes: {dict(df.dtypes.astype(str))}\nindex: {df.index!r}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            pool, read = _build(case, df, tmpdir)
        except PoolError as exc:
            pool, error = None, exc
        if pool is not None:
            note(f"pool: {pool!r}, kind {pool.score_kind}, notes {pool.notes}")
            assert not case.hard, f"a frame with defects {case.hard} gave a pool"
            _check_pool(case, read, pool, caught)
    others = [f"{x.category.__name__}: {x.message}" for x in caught if not issubclass(x.category, PoolWarning)]
    assert not others, f"warnings other than PoolWarning: {others}"
    if pool is None:
        _check_error(case, df, error)
    return pool if pool is not None else error


@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_a_pool_frame_gives_a_correct_pool_or_a_named_error(tmp_path_factory, case_df):
    case, df = case_df
    out = _check_case(case, df, str(tmp_path_factory.mktemp("pool")))
    event(f"via {case.via}")
    event("pool" if isinstance(out, Pool) else ("error, defects " + ",".join(sorted({t for t, _ in case.hard}))
                                                if case.hard else "error, no defect"))
    if "item" in df.columns:
        event(f"ids {case.columns['item'][1]} -> " + ("pool" if isinstance(out, Pool) else "error"))


# ------------------------------------------------------------------ what it found
def _case_of(df, id_defect=None, via="frame", **kw):
    """A Case for a hand-written frame, classified as the generator classifies its own."""
    case = Case()
    for c in df.columns:
        case.columns[c] = (df[c], str(df[c].dtype), set(), df[c].tolist())
    case.kw = {"score_kind": None, "threshold": None, **kw}
    case.via = via
    _classify(case, df, len(df), id_defect)
    return case


_FOUND = {
    # an object column of numbers (Python numbers, None): TypeError from .iloc[None]
    "object numbers": (pd.DataFrame({"score": [0.0, 0.5], "pred": [0, 1], "label": pd.Series([0, 1], dtype=object)}),
                       {}),
    "categorical predictions": (pd.DataFrame({"score": [0.1, 0.7], "pred": pd.Categorical([0, 1])}), {}),
    # mixed ids were turned into text: the id 7 was found only as "7"
    "mixed ids": (pd.DataFrame({"item": pd.Series([0, "a", 7], dtype=object), "score": [0.1, 0.2, 0.9],
                                "pred": [0, 0, 1]}), {}),
    # ... but 0 and "0" are one id to a session or a label file: a named error, not a
    # pandas InvalidIndexError when the session is built
    "mixed ids equal as text": (pd.DataFrame({"item": pd.Series([0, "0", 7], dtype=object), "score": [0.1, 0.2, 0.9],
                                              "pred": [0, 0, 1]}), {"id_defect": "duplicate id (as text)"}),
    # an object id column of Python ints: index_of(the column) refused the int 0
    "object int ids": (pd.DataFrame({"item": pd.Series([0], dtype=object), "score": [0.0], "pred": [0]}), {}),
    # weights summing past 1e308: the sum overflowed and every weight became 0
    "huge weights": (pd.DataFrame({"score": [0.1, 0.2, 0.9], "pred": [0, 0, 1], "weight": [1e308] * 3}),
                     {"weight": "weight"}),
    # finite margins whose range overflows: NaN histogram codes, ValueError from bincount
    "extreme margins": (pd.DataFrame({"score": [-1.7976931348623157e308, 1.7976931348623157e308] + list(range(20)),
                                      "pred": [0, 1] * 11}), {}),
    # a duplicate string id ending in NUL: numpy's == missed it, IndexError
    "NUL-ended duplicate id": (pd.DataFrame({"item": pd.Series(["a\x00", "b", "a\x00"], dtype=object),
                                            "score": [0.1, 0.2, 0.9], "pred": [0, 0, 1]}), {"id_defect": "duplicate"}),
    # an integer id column with a gap (floats) and a bad value: the message named item 1001.0
    "missing integer id": (pd.DataFrame({"item": pd.array([None, 1001, 1002], dtype="Int64"),
                                         "score": [0.1, 0.2, 0.9], "pred": [0, np.nan, 1]}),
                           {"id_defect": "missing id"}),
}


@pytest.mark.parametrize("name", list(_FOUND))
@pytest.mark.parametrize("via", ["frame", "parquet"])
def test_what_the_property_test_found(name, via, tmp_path):
    df, kw = _FOUND[name]
    out = _check_case(_case_of(df, via=via, **kw), df, str(tmp_path))
    if name in ("mixed ids",) and via == "frame":
        assert out.ids.tolist() == [0, "a", 7] and out.index_of(np.array([7, "a"], dtype=object)).tolist() == [2, 1]
    if name == "huge weights":
        np.testing.assert_allclose(out.weights, 1 / 3)
    if name == "missing integer id":
        assert "missing id at row 0" in str(out)
