"""Pools as users have them (issue 14): probability / logit / rank scores, their own item
ids in every file format, missing columns, ties.  Each test here failed before score kinds
(a probability was pushed through a sigmoid; a Parquet pool's ``item`` column was ignored;
a missing ``pred`` became ``score >= 0`` without a word; tied scores put both predicted
classes in one stratum)."""
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_eval.pool import Pool, PoolError, PoolWarning, demo_pool, sigmoid
from bayes_eval.registry import load_pool
from bayes_eval.scores import detect_score_kind, stratification_scale
from bayes_eval.strata import stratify


def _arrays(n=4000, seed=3):
    d = demo_pool(n, positive_rate=0.02, seed=seed)
    return np.asarray(d.scores[:, 0]), np.asarray(d.preds[:, 0]), np.asarray(d.labels)


# ------------------------------------------------------------------ score kinds
def test_detection_of_score_kinds():
    s, pred, y = _arrays()
    assert detect_score_kind(s[:, None]) == "margin"
    assert detect_score_kind(sigmoid(s)[:, None]) == "probability"
    ranks = np.empty(s.size)
    ranks[np.argsort(s)] = np.arange(1, s.size + 1)
    assert detect_score_kind(ranks[:, None]) == "rank"
    assert detect_score_kind((ranks - 1)[:, None]) == "rank"
    assert detect_score_kind(np.r_[ranks[:-1], ranks[-1] + 5][:, None]) == "margin"  # not a permutation
    p = Pool.from_arrays(scores=sigmoid(s), preds=pred)
    assert p.score_kind == "probability"
    assert any("probabilities" in n for n in p.notes)
    assert p.read_options == {"score_kind": "probability", "threshold": None, "csv_ids": "text"}


def test_a_probability_is_never_pushed_through_a_sigmoid():
    s, pred, y = _arrays()
    prob = sigmoid(s)
    p = Pool.from_arrays(scores=prob, preds=pred, labels=y)
    np.testing.assert_array_equal(p.probs[:, 0, 1], prob)          # the prior is the probability itself
    np.testing.assert_allclose(p.probs[:, 0, 0], 1 - prob)
    old = Pool.from_arrays(scores=prob, preds=pred, labels=y, score_kind="margin")  # what releases did
    assert old.probs[:, 0, 1].min() >= 0.5                         # every item a prior of 0.5-0.73
    m = Pool.from_arrays(scores=s, preds=pred, labels=y)
    np.testing.assert_allclose(m.probs, p.probs, rtol=1e-12)        # the same prior as from the margin


@pytest.mark.parametrize("transform", ["probability", "logit", "platt", "rank"])
def test_strata_do_not_depend_on_how_the_scores_are_written(transform):
    """CSF strata on the kind's scale: a probability sigmoid(s), its logit and a Platt
    probability sigmoid(a s + b) give exactly the margin's strata; ranks give strata whose
    order agrees with the score (equal-frequency-like bins on logit(rank/N))."""
    s, pred, y = _arrays()
    ref = stratify(Pool.from_arrays(scores=s, preds=pred), 64)
    if transform == "probability":
        sc, kind = sigmoid(s), None
    elif transform == "logit":
        sc, kind = 1.7 * s - 0.4, "logit"
    elif transform == "platt":
        sc, kind = sigmoid(1.7 * s - 0.4), None
    else:
        sc = np.empty(s.size)
        sc[np.argsort(s)] = np.arange(1, s.size + 1)
        kind = None
    st = stratify(Pool.from_arrays(scores=sc, preds=pred, score_kind=kind), 64)
    if transform == "rank":
        order = np.argsort(s)
        assert np.all(np.diff(st.index[order]) >= 0)  # monotone in the score
        assert st.n_strata >= 32
        # the top stratum is small (the tail is resolved), not N/K items
        assert st.sizes[-1] < s.size / 64
    else:
        np.testing.assert_array_equal(st.index, ref.index)
        assert st.lower[0] == pytest.approx(sc.min())  # bounds in the pool's own units
        assert st.upper[-1] == pytest.approx(sc.max())


def test_probabilities_with_exact_zeros_and_ones_keep_the_interior_spread():
    rng = np.random.default_rng(0)
    p = np.clip(rng.beta(0.3, 3, 5000), 0, 1)
    p[:300] = 0.0
    p[-50:] = 1.0
    z = stratification_scale(p, "probability")
    assert np.isfinite(z).all()
    interior = (p > 0) & (p < 1)
    assert z[p == 0].max() < z[interior].min() and z[p == 1].min() > z[interior].max()
    assert z.max() - z.min() < (z[interior].max() - z[interior].min()) + 2.0 + 1e-9


def test_score_kind_errors():
    s, pred, _ = _arrays(200)
    with pytest.raises(PoolError, match="unknown score kind 'odds'"):
        Pool.from_arrays(scores=s, preds=pred, score_kind="odds")
    with pytest.raises(PoolError, match=r"'probability' but value .* at row \d+ .* outside \[0, 1\]"):
        Pool.from_arrays(scores=s, preds=pred, score_kind="probability")
    with pytest.raises(PoolError, match="not numeric|non-numeric"):
        Pool.from_arrays(scores=["a", "b"], preds=[0, 1])
    with pytest.raises(PoolError, match="single value"):
        Pool.from_arrays(scores=np.float64(1.0), preds=[0])


# ------------------------------------------------------------------ predictions
def test_missing_pred_is_an_error_that_says_how_to_supply_it():
    s, pred, y = _arrays(300)
    with pytest.raises(PoolError, match=r"column 'pred' not found.*threshold=0\b"):
        Pool.from_arrays(scores=s, labels=y)
    with pytest.raises(PoolError, match=r"threshold=0\.5"):
        Pool.from_arrays(scores=sigmoid(s), labels=y)
    p = Pool.from_arrays(scores=sigmoid(s), labels=y, threshold=0.5)
    np.testing.assert_array_equal(p.preds[:, 0], pred)
    assert p.threshold == 0.5 and any("score >= 0.5" in n for n in p.notes)
    assert p.read_options["threshold"] == 0.5
    with pytest.raises(PoolError, match="has a 'pred' column"):
        Pool.from_arrays(scores=s, preds=pred, threshold=0.0)
    # legacy (sessions created before score kinds): score >= 0, said in the notes
    leg = Pool.from_arrays(scores=s, labels=y, legacy=True)
    np.testing.assert_array_equal(leg.preds[:, 0], pred)


def test_missing_score_warns_and_stratifies_by_prediction():
    _, pred, y = _arrays(500)
    with pytest.warns(PoolWarning, match="cannot adapt"):
        p = Pool.from_arrays(preds=pred, labels=y)
    assert p.score_kind == "none"
    st = stratify(p, 256)
    assert st.n_strata == 2
    np.testing.assert_array_equal(st.index, pred)
    np.testing.assert_allclose(p.probs[:, 0, 1], 0.5)


def test_all_predictions_one_class_is_noted():
    s, _, y = _arrays(300)
    p = Pool.from_arrays(scores=s, preds=np.zeros(300, int), labels=y)
    assert any("every item is predicted 0" in n for n in p.notes)


# ------------------------------------------------------------------ ties
@pytest.mark.parametrize("n_distinct", [1, 3])
def test_tied_scores_never_mix_predicted_classes_in_a_stratum(n_distinct):
    s, pred, y = _arrays(3000)
    sc = np.zeros_like(s) if n_distinct == 1 else np.digitize(s, [-2.5, -1.0]).astype(float)
    p = Pool.from_arrays(scores=sc, preds=pred, labels=y)
    st = stratify(p, 256)
    for k in range(st.n_strata):
        assert np.unique(pred[st.index == k]).size == 1
    # equal scores with equal predictions still share a stratum
    key = sc * 2 + pred
    for v in np.unique(key):
        assert np.unique(st.index[key == v]).size == 1


def test_non_threshold_predictions_split_strata_and_keep_k():
    s, pred, y = _arrays(3000)
    rng = np.random.default_rng(1)
    other = (rng.random(s.size) < 0.3).astype(int)  # predictions not a threshold of this score
    st = stratify(Pool.from_arrays(scores=s, preds=other), 64)
    assert st.n_strata <= 64
    for k in range(st.n_strata):
        assert np.unique(other[st.index == k]).size == 1


# ------------------------------------------------------------------ ids, every format
def _frame(ids):
    s, pred, y = _arrays(50)
    return pd.DataFrame({"item": ids, "score": s, "pred": pred, "label": y, "text": [f"t{i}" for i in range(50)]})


@pytest.mark.parametrize("fmt", ["parquet", "parquet-index", "csv", "csv-index", "tsv"])
@pytest.mark.parametrize("kind", ["str", "int"])
def test_item_column_is_the_id_in_every_format(tmp_path, fmt, kind):
    ids = [f"pair-{i:04d}" for i in range(19, 69)] if kind == "str" else list(range(1000, 1050))
    df = _frame(ids)
    path = tmp_path / f"pool.{fmt.split('-')[0]}"
    if fmt == "parquet":
        df.to_parquet(path, index=False)
    elif fmt == "parquet-index":
        df.set_index("item").to_parquet(path)
    elif fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "csv-index":
        df.set_index("item").to_csv(path)
    else:
        df.to_csv(path, index=False, sep="\t")
    pool = load_pool(str(path))
    assert list(pool.ids) == ids
    if kind == "int":
        assert pool.ids.dtype.kind in "iu"
    assert pool.index_of([ids[7], ids[0]]).tolist() == [7, 0]
    with pytest.raises(PoolError, match="unknown item id"):
        pool.index_of([ids[0], "pair-9999" if kind == "str" else 5])
    assert "text" in pool.columns.columns and "item" not in pool.columns.columns


def test_frame_written_with_its_index_to_csv(tmp_path):
    df = _frame(list(range(50))).drop(columns="item")
    df.index = [f"x{i}" for i in range(50)]
    df.to_csv(tmp_path / "p.csv")
    pool = load_pool(str(tmp_path / "p.csv"))
    assert pool.ids[0] == "x0" and "Unnamed: 0" not in pool.columns.columns


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_the_ids_from_a_column_named_otherwise(tmp_path, fmt):
    """--id-column NAME / item=NAME: the ids from the user's own column (zero-padded text kept as
    written in a CSV); the column is not shown again as one of the pool's own columns; a session
    records it (read_options) and reopens with it. Without it, a pool whose ids fall back to row
    numbers says which column looks like its ids."""
    ids = [f"{i:05d}" for i in range(50)]
    df = _frame(ids).rename(columns={"item": "doc_id"})
    path = tmp_path / f"pool.{fmt}"
    df.to_parquet(path, index=False) if fmt == "parquet" else df.to_csv(path, index=False)
    pool = load_pool(str(path), id_column="doc_id")
    assert list(pool.ids) == ids and pool.id_column == "doc_id"
    assert pool.read_options["id_column"] == "doc_id" and "doc_id" not in pool.columns.columns
    assert pool.index_of(["00007"]).tolist() == [7]
    assert load_pool(str(path), **pool.read_options).fingerprint() == pool.fingerprint()
    plain = load_pool(str(path))                        # row numbers, and a note naming the column
    assert plain.ids.tolist() == list(range(50)) and "id_column" not in plain.read_options
    assert any("--id-column doc_id" in n for n in plain.notes)
    dup = df.assign(doc_id=["a"] * 50)                   # not unique: not taken for ids, no note
    dup.to_parquet(tmp_path / "dup.parquet", index=False)
    assert not any("--id-column" in n for n in load_pool(str(tmp_path / "dup.parquet")).notes)
    with pytest.raises(PoolError, match="column 'nope' not found"):
        load_pool(str(path), id_column="nope")
    with pytest.raises(PoolError, match="'score' is the pool's score column"):
        load_pool(str(path), id_column="score")
    with pytest.raises(PoolError, match="duplicate id"):
        load_pool(str(tmp_path / "dup.parquet"), id_column="doc_id")
    with pytest.raises(PoolError, match="demo pool's ids are its row numbers"):
        load_pool("demo", id_column="doc_id")


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_score_pred_and_label_from_columns_named_otherwise(tmp_path, fmt):
    """--score-column / --pred-column / --label-column (``columns=``): the user's own names read as
    the roles they say, the same pool as with the standard names (same fingerprint), recorded in
    read_options so that a session reopens with them; without them the error names the flags; a
    named column that is absent, a column named twice and the demo pool are refused."""
    ids = [f"{i:05d}" for i in range(50)]
    df = _frame(ids)
    std = tmp_path / f"std.{fmt}"
    own = tmp_path / f"own.{fmt}"
    mine = df.rename(columns={"score": "prob_margin", "pred": "predicted", "label": "gold"})
    for frame, path in ((df, std), (mine, own)):
        frame.to_parquet(path, index=False) if fmt == "parquet" else frame.to_csv(path, index=False)
    cols = {"score": "prob_margin", "pred": "predicted", "label": "gold"}
    pool = load_pool(str(own), columns=cols)
    ref = load_pool(str(std))
    assert pool.fingerprint() == ref.fingerprint()
    assert np.array_equal(pool.scores, ref.scores) and np.array_equal(pool.labels, ref.labels)
    assert pool.read_options["columns"] == cols and "columns" not in ref.read_options
    assert not set(cols.values()) & set(pool.columns.columns)   # not shown again as the pool's own columns
    assert any("score from column 'prob_margin'" in n for n in pool.notes)
    assert load_pool(str(own), **pool.read_options).fingerprint() == pool.fingerprint()
    with pytest.raises(PoolError, match="no 'score' or 'pred' column") as e:
        load_pool(str(own))
    assert "--score-column NAME" in e.value.cli and "--pred-column NAME" in e.value.cli
    with pytest.raises(PoolError, match="column 'nope' not found"):
        load_pool(str(own), columns={**cols, "label": "nope"})
    with pytest.raises(PoolError, match="two roles"):
        load_pool(str(own), columns={"score": "gold", "label": "gold"})
    with pytest.raises(PoolError, match="unknown role"):
        load_pool(str(own), columns={"weight": "gold"})
    with pytest.raises(PoolError, match="demo pool's columns"):
        load_pool("demo", columns={"score": "x"})


def test_a_pool_as_users_save_it_semicolons_json_lines_json(tmp_path):
    """A ;-separated CSV (a spreadsheet's export in many locales), JSON lines and a JSON list of
    records read as the same pool as Parquet (same fingerprint, string ids kept); the separator
    is said in the notes; a spreadsheet is refused saying what to do; column names with braces
    do not break the message of a pool without scores."""
    ids = [f"{i:05d}" for i in range(50)]
    df = _frame(ids)
    df.to_parquet(tmp_path / "p.parquet", index=False)
    ref = load_pool(str(tmp_path / "p.parquet"))
    df.to_csv(tmp_path / "semi.csv", sep=";", index=False)
    df.to_json(tmp_path / "p.jsonl", orient="records", lines=True, double_precision=15)
    df.to_json(tmp_path / "p.json", orient="records", double_precision=15)
    for name in ("semi.csv", "p.jsonl", "p.json"):
        pool = load_pool(str(tmp_path / name))
        assert list(pool.ids) == ids, name
        np.testing.assert_allclose(pool.scores, ref.scores, rtol=1e-13)   # (JSON's writer rounds to 15 digits)
        assert np.array_equal(pool.preds, ref.preds) and np.array_equal(pool.labels, ref.labels), name
        assert list(pool.columns.columns) == list(ref.columns.columns), name
    assert load_pool(str(tmp_path / "semi.csv")).fingerprint() == ref.fingerprint()
    df.to_csv(tmp_path / "comma.csv", sep=";", decimal=",", index=False)   # and with decimal commas
    assert load_pool(str(tmp_path / "comma.csv")).fingerprint() == ref.fingerprint()
    assert any("separated by semicolons" in n for n in load_pool(str(tmp_path / "semi.csv")).notes)
    (tmp_path / "p.xlsx").write_bytes(b"PK")
    with pytest.raises(PoolError, match="a spreadsheet; save its sheet as CSV"):
        load_pool(str(tmp_path / "p.xlsx"))
    df.rename(columns={"score": "{s}", "pred": "{p}"}).to_json(tmp_path / "braces.jsonl", orient="records", lines=True)
    with pytest.raises(PoolError, match="no 'score' or 'pred' column.*'{s}'"):
        load_pool(str(tmp_path / "braces.jsonl"))


def test_class_names_in_pred_and_label_read_with_a_label_map(tmp_path):
    """pred / label written as class names (``match`` / ``non-match``): refused without a map, the
    message naming the names and the flag; with ``label_map`` (``--label-map``) the same pool as
    the 0/1 file, names matched ignoring case, recorded in read_options for a session's reopen; a
    name the map lacks is refused with its row."""
    ids = [f"{i:05d}" for i in range(50)]
    df = _frame(ids)
    df.loc[df.index[1:10], "pred"] = 1
    df.to_parquet(tmp_path / "p.parquet", index=False)
    ref = load_pool(str(tmp_path / "p.parquet"))
    names = df.assign(pred=np.where(df["pred"] == 1, "match", "non-match"),
                      label=np.where(df["label"] == 1, "Match", "non-match"))
    names.to_csv(tmp_path / "names.csv", index=False)
    with pytest.raises(PoolError, match="non-numeric value 'non-match'") as e:
        load_pool(str(tmp_path / "names.csv"))
    assert "--label-map non-match=?,match=?" in e.value.cli
    lm = {"non-match": 0, "match": 1}
    pool = load_pool(str(tmp_path / "names.csv"), label_map=lm)
    assert pool.fingerprint() == ref.fingerprint()
    assert pool.read_options["label_map"] == lm and "label_map" not in ref.read_options
    assert load_pool(str(tmp_path / "names.csv"), **pool.read_options).fingerprint() == ref.fingerprint()
    assert load_pool(str(tmp_path / "p.parquet"), label_map=lm).read_options == ref.read_options   # numbers: unused
    names.loc[7, "label"] = "maybe"
    names.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(PoolError, match="'maybe' at row 7 .* not in the label map"):
        load_pool(str(tmp_path / "bad.csv"), label_map=lm)


def test_load_pool_reads_score_kind_and_threshold(tmp_path):
    s, pred, y = _arrays(200)
    pd.DataFrame({"score": sigmoid(s), "label": y}).to_parquet(tmp_path / "p.parquet")
    with pytest.raises(PoolError, match="threshold=0.5"):
        load_pool(str(tmp_path / "p.parquet"))
    p = load_pool(str(tmp_path / "p.parquet"), threshold=0.5)
    assert p.score_kind == "probability" and p.preds[:, 0].tolist() == pred.tolist()
    q = load_pool(str(tmp_path / "p.parquet"), score_kind="margin", threshold=0.5)
    assert q.score_kind == "margin" and q.fingerprint() != p.fingerprint()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_pool("demo")


def test_class_probability_columns_of_a_pool_of_several_classes(tmp_path):
    """--prob-columns (``columns={"prob": [...]}``): a file of several classes with one probability
    column per class reads as the same pool as ``probs=`` from Python (same fingerprint: the prior of
    every class its probability, the score the predicted class's, predictions their argmax where the
    file has none), recorded so that a session reopens with them, and not shown again as the pool's
    own columns; a wrong count of columns, a binary pool and probabilities that do not sum to one
    are refused naming what to do."""
    rng = np.random.default_rng(0)
    n, c = 300, 4
    probs = rng.dirichlet(np.full(c, 0.5), n)
    y = np.array([rng.choice(c, p=p) for p in probs])
    names = ["p_cat", "p_dog", "p_owl", "p_eel"]
    df = pd.DataFrame({"doc": [f"d{i}" for i in range(n)], "label": y, **dict(zip(names, probs.T)), "note": "x"})
    path = tmp_path / "four.csv"
    df.to_csv(path, index=False)
    pool = load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})
    ref = Pool.from_arrays(probs=probs, labels=y, n_classes=c, ids=df["doc"].to_numpy())
    assert pool.fingerprint() == ref.fingerprint()
    np.testing.assert_allclose(pool.probs[:, 0, :], probs, rtol=1e-15)
    assert np.array_equal(pool.preds[:, 0], probs.argmax(1))
    np.testing.assert_allclose(pool.scores[:, 0], probs.max(1), rtol=1e-15)
    assert pool.read_options["columns"] == {"prob": names}
    assert list(pool.columns.columns) == ["note"]
    assert any("the prior of every class is its probability" in x for x in pool.notes)
    assert load_pool(str(path), **pool.read_options).fingerprint() == pool.fingerprint()   # a session's reopen
    assert not any("no class probabilities" in x for x in pool.notes)
    # the same pool as pred + confidence: the note says what the probabilities would add
    conf = pd.DataFrame({"pred": probs.argmax(1), "score": probs.max(1), "label": y})
    conf.to_csv(tmp_path / "conf.csv", index=False)
    said = load_pool(str(tmp_path / "conf.csv"), n_classes=c).notes
    assert any("no class probabilities" in x and "--prob-columns" in x for x in said), said
    with pytest.raises(PoolError, match="3 named") as e:
        load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names[:3]})
    assert "--prob-columns names 3 column(s)" in e.value.cli and "class order 0..3" in e.value.cli
    df.drop(columns="label").to_csv(tmp_path / "four_unlabeled.csv", index=False)
    with pytest.raises(PoolError, match="not 1") as e:      # two of four classes, --classes forgotten
        load_pool(str(tmp_path / "four_unlabeled.csv"), id_column="doc", columns={"prob": names[:2]}, threshold=0.5)
    assert "a pool of several classes needs --classes C and one --prob-columns column per class" in e.value.cli
    with pytest.raises(PoolError, match="pools of several classes") as e:
        load_pool(str(path), id_column="doc", columns={"prob": names[:3]})
    assert "--score-column NAME" in e.value.cli and "--prob-columns P0,P1" in e.value.cli
    with pytest.raises(PoolError, match="two roles"):
        load_pool(str(path), n_classes=c, columns={"prob": names, "score": "p_cat"})
    df.loc[7, names] = 0.1            # scores per class, not a distribution over them
    df.to_csv(path, index=False)
    with pytest.raises(PoolError, match=r"at row 7 \(item 'd7'\) sum to .*not 1"):
        load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})


def test_class_probabilities_rounded_in_the_file_are_read_as_given(tmp_path):
    """A file's class probabilities rounded to two decimals sum to anything within C × 0.005 of 1
    (stop 79: three classes at 0.33 each, summing to 0.99, were refused -- 0.01 off read as more than
    the 0.01 allowed): accepted as given, with a note, and a row off by more than rounding explains
    is still refused, naming the allowance; unrounded probabilities keep the 0.01."""
    rng = np.random.default_rng(3)
    n, c = 400, 4
    probs = rng.dirichlet(np.full(c, 0.7), n).round(2)
    probs[0] = [0.33, 0.33, 0.33, 0.0]                  # sums to 0.99, the edge that was refused
    names = ["p_a", "p_b", "p_c", "p_d"]
    df = pd.DataFrame({"doc": [f"d{i}" for i in range(n)], **dict(zip(names, probs.T))})
    path = tmp_path / "rounded.csv"
    df.to_csv(path, index=False)
    sums = probs.sum(1)
    assert np.abs(sums - 1).max() > 0.01                 # the case: more than 0.01 off somewhere
    pool = load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})
    np.testing.assert_array_equal(pool.probs[:, 0, :], probs)                  # as given, not rescaled
    off = int((np.abs(sums - 1) > 1e-6).sum())
    assert any(f"({off:,} of {n:,}; rounded in the file): used as given" in x for x in pool.notes), pool.notes
    assert load_pool(str(path), **pool.read_options).fingerprint() == pool.fingerprint()   # a session's reopen
    df.loc[9, names] = [0.5, 0.2, 0.2, 0.05]            # 0.95: more than 4 × 0.005 off
    df.to_csv(path, index=False)
    with pytest.raises(PoolError, match=r"at row 9 \(item 'd9'\) sum to 0.95, not 1 \(rounding to 0.01 explains ±0.02\)"):
        load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})
    df.loc[9, names[:3]] = [0.5, 0.2, 0.2]              # 0.9 from values of one decimal, in a file of two:
    df.loc[9, names[3]] = 0.0                           # the file's step (0.01) sets the allowance, not the row's
    df.to_csv(path, index=False)
    with pytest.raises(PoolError, match=r"at row 9 \(item 'd9'\) sum to 0.9, not 1 \(rounding to 0.01 explains ±0.02\)"):
        load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})
    exact = rng.dirichlet(np.full(c, 0.7), n)
    exact[5] *= 0.985                                    # unrounded: 0.015 off is not rounding
    pd.DataFrame({"doc": df["doc"], **dict(zip(names, exact.T))}).to_csv(path, index=False)
    with pytest.raises(PoolError, match=r"at row 5 \(item 'd5'\) sum to .*not 1 \(±0.01 is allowed\)"):
        load_pool(str(path), n_classes=c, id_column="doc", columns={"prob": names})


def test_prob_columns_from_the_command_line():
    """The flag's comma-separated names become ``columns["prob"]``, the other roles as before."""
    import argparse

    from bayes_eval.session_cli import add_pool_reading_args, pool_columns

    p = argparse.ArgumentParser()
    add_pool_reading_args(p)
    args = p.parse_args(["--classes", "3", "--prob-columns", "a, b,c", "--label-column", "gold"])
    assert pool_columns(args) == {"label": "gold", "prob": ["a", "b", "c"]}
    assert pool_columns(p.parse_args([])) == {}


def test_the_id_check_answers_as_numpys_unique_for_every_kind_of_id():
    """``checks.all_distinct`` (the pool's duplicate-id check; NumPy 2.4's hashing ``np.unique``
    took 10 s on 10^7 integer ids) says what ``np.unique(ids).size == len(ids)`` says, for
    integers, floats (0.0 and -0.0 are one id), fixed-width and Python strings, ints and
    floats mixed; ids of strings and numbers mixed raise TypeError as ``np.unique`` does (the
    pool then matches them as text)."""
    from bayes_eval.checks import all_distinct

    rng = np.random.default_rng(5)
    cases = []
    for n in (1, 2, 50, 3000):
        for hi in (n // 2 + 1, 10 * n):                  # with and without repeats
            x = rng.integers(-hi, hi, n)
            cases += [x, x.astype(np.int8) if hi < 100 else x, x.astype(float), x.astype(str), x.astype(object),
                      np.array([f"id {v}" for v in x], dtype=object), x.astype(np.uint32) if x.min() >= 0 else x]
    cases += [np.array([0.0, -0.0]), np.array([1, 1.0], dtype=object), np.array([1, 2.0], dtype=object),
              np.array(["a\x00", "a"], dtype=object), np.array([True, False]), np.array([True, True])]
    for a in cases:
        assert all_distinct(a) == (np.unique(a).size == a.size), (a.dtype, a[:5])
    assert any(not all_distinct(a) for a in cases) and any(all_distinct(a) for a in cases)
    for mixed in ([1, "a"], ["b", 2, "c"]):
        with pytest.raises(TypeError):
            all_distinct(np.array(mixed, dtype=object))
        with pytest.raises(TypeError):
            np.unique(np.array(mixed, dtype=object))
    # the pool: a repeated id among 3,000 string ids is still refused at its second row
    ids = np.array([f"u-{i}" for i in range(3000)], dtype=object)
    ids[2999] = ids[17]
    with pytest.raises(PoolError, match=r"duplicate id 'u-17' at row 2999"):
        Pool.from_arrays(rng.normal(size=3000), ids=ids)


def test_a_binary_pools_two_class_probabilities_read_as_its_score(tmp_path):
    """``--prob-columns p_no,p_yes`` on a binary pool (``predict_proba``'s two columns, in class
    order; refused before, pointing to --score-column): the score is the second, the first is
    checked to be 1 minus it, the pool is the one ``--score-column p_yes`` reads (same
    fingerprint) and reopens from its read options; a row that does not sum to 1, a missing
    first column and three columns are refused."""
    rng = np.random.default_rng(4)
    n = 400
    p1 = 1 / (1 + np.exp(-rng.normal(-1, 2, n)))
    path = tmp_path / "pp.csv"
    pd.DataFrame({"item": np.arange(n), "p_no": 1 - p1, "p_yes": p1}).to_csv(path, index=False)
    pool = load_pool(str(path), columns={"prob": ["p_no", "p_yes"]}, threshold=0.5)
    ref = load_pool(str(path), columns={"score": "p_yes"}, threshold=0.5)
    assert pool.fingerprint() == ref.fingerprint() and pool.score_kind == "probability"
    np.testing.assert_allclose(np.asarray(pool.scores[:, 0]), p1)
    assert any("'p_no' checked to be 1 minus it" in note for note in pool.notes)
    assert pool.read_options["columns"] == {"prob": ["p_no", "p_yes"]}          # reopened through the same check
    again = load_pool(str(path), **pool.read_options)
    assert again.fingerprint() == pool.fingerprint() and any("checked to be 1 minus it" in x for x in again.notes)
    assert "p_no" not in pool.columns.columns and "p_no" in ref.columns.columns   # not shown to annotators
    bad = pd.read_csv(path)
    bad.loc[7, "p_no"] = 0.5
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(PoolError, match=r"'p_no \+ p_yes': the class probabilities at row 7 .* not 1"):
        load_pool(str(tmp_path / "bad.csv"), columns={"prob": ["p_no", "p_yes"]}, threshold=0.5)
    with pytest.raises(PoolError, match="p_none"):
        load_pool(str(path), columns={"prob": ["p_none", "p_yes"]}, threshold=0.5)
    with pytest.raises(PoolError, match="class probability columns are for pools of several classes"):
        load_pool(str(path), columns={"prob": ["p_no", "p_yes", "item"]}, threshold=0.5)
