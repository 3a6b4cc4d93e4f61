"""Pool construction and validation: every bad input gets a clear error naming column and row."""
import numpy as np
import pandas as pd
import pytest

from bayes_eval.pool import Pool, PoolError, demo_pool, sigmoid


def _frame(n=10, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    return pd.DataFrame({"score": s, "pred": (s >= 0).astype(int), "label": rng.integers(0, 2, n)})


def test_from_arrays_defaults():
    s = np.array([-2.0, 0.5, 3.0])
    pool = Pool.from_arrays(scores=s, threshold=0)
    assert pool.n_items == 3 and pool.n_systems == 1 and pool.n_classes == 2
    np.testing.assert_array_equal(pool.preds[:, 0], [0, 1, 1])
    np.testing.assert_allclose(pool.probs[:, 0, 1], sigmoid(s))
    np.testing.assert_allclose(pool.weights, 1 / 3)
    np.testing.assert_array_equal(pool.ids, [0, 1, 2])
    assert pool.labels is None


def test_weights_normalised_and_multisystem():
    pool = Pool.from_arrays(scores=np.array([[0.1, -1], [2, 3], [-1, 0.2]]), weights=[1, 2, 1], labels=[0, 1, 0],
                            threshold=0)
    assert pool.n_systems == 2
    np.testing.assert_allclose(pool.weights, [0.25, 0.5, 0.25])
    np.testing.assert_array_equal(pool.preds[:, 1], [0, 1, 1])


def test_from_frame_csv_parquet_roundtrip(tmp_path):
    df = _frame(20)
    p1 = Pool.from_frame(df)
    df.to_csv(tmp_path / "p.csv", index_label="item")
    df.to_parquet(tmp_path / "p.parquet")
    p2 = Pool.from_file(str(tmp_path / "p.csv"))
    p3 = Pool.from_file(str(tmp_path / "p.parquet"))
    for p in (p2, p3):
        np.testing.assert_allclose(p.scores, p1.scores)
        np.testing.assert_array_equal(p.labels, p1.labels)
        np.testing.assert_array_equal(p.ids, p1.ids)
    assert p1.fingerprint() == p3.fingerprint()


def test_fingerprint_changes_with_content():
    df = _frame(20)
    a = Pool.from_frame(df).fingerprint()
    df.loc[3, "score"] += 1e-9
    assert Pool.from_frame(df).fingerprint() != a


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_score_names_column_and_row(bad):
    df = _frame(10)
    df.loc[6, "score"] = bad
    with pytest.raises(PoolError, match=r"column 'score'.*row 6"):
        Pool.from_frame(df)


@pytest.mark.parametrize("ext,sep", [(".csv", ","), (".tsv", "\t")])
def test_a_csv_row_cut_short_is_named_as_such(tmp_path, ext, sep):
    """A row with fewer fields than the header (pandas reads the missing ones as NaN) is
    refused as a short row with its line, not as a non-finite value; an empty field in a
    full-length row is still a non-finite value at its row."""
    lines = [sep.join(["item", "score", "pred", "label"])] + [sep.join([f"i{k}", "0.5", "1", "1"]) for k in range(5)]
    short = lines[:3] + [sep.join(["i9", "0.1"])] + lines[3:]
    f = tmp_path / f"short{ext}"
    f.write_text("\n".join(short) + "\n")
    with pytest.raises(PoolError, match=r"line 4 has 2 of the header's 4 columns \(item, score, pred, label\): a row cut short"):
        Pool.from_file(str(f))
    empty = lines[:3] + [sep.join(["i9", "", "1", "1"])] + lines[3:]
    f.write_text("\n".join(empty) + "\n")
    with pytest.raises(PoolError, match=r"column 'score'.*row 2"):
        Pool.from_file(str(f))


def test_a_bare_carriage_return_in_a_text_field_ends_the_row_there(tmp_path):
    """pandas writes a text value holding a bare \\r unquoted, and reads the \\r back as the
    end of a record: the file then holds a row cut short, and the message names its line
    (found by tests/test_pool_properties.py)."""
    df = pd.DataFrame({"item": range(9), "label": [0.0] * 9, "pred": [2.0] + [0.0] * 8, "score": [0.0] * 9,
                       "text": [None] * 7 + [" \r0", None]})
    f = tmp_path / "cr.csv"
    df.to_csv(f, index=False)
    with pytest.raises(PoolError, match=r"line 10 has 1 of the header's 5 columns"):
        Pool.from_file(str(f))


def test_mismatched_lengths():
    with pytest.raises(PoolError, match="mismatched lengths"):
        Pool.from_arrays(scores=np.zeros(5), labels=np.zeros(4, int))


def test_empty_pool():
    with pytest.raises(PoolError, match="empty"):
        Pool.from_arrays(scores=np.zeros(0))
    with pytest.raises(PoolError, match="empty"):
        Pool.from_frame(_frame(5).iloc[:0])


def test_labels_outside_label_set():
    df = _frame(10)
    df.loc[4, "label"] = 2
    with pytest.raises(PoolError, match=r"column 'label'.*row 4.*outside the label set"):
        Pool.from_frame(df)
    df["label"] = df["label"].astype(float)   # as read where the column has a missing value elsewhere
    df.loc[4, "label"] = 7.0
    with pytest.raises(PoolError, match=r"column 'label': value 7 at row 4 "):
        Pool.from_frame(df)
    df.loc[4, "label"] = 0.5
    with pytest.raises(PoolError, match=r"column 'label': value 0.5 at row 4 "):
        Pool.from_frame(df)


def test_preds_outside_label_set():
    df = _frame(10)
    df.loc[2, "pred"] = -1
    with pytest.raises(PoolError, match=r"column 'pred'.*row 2"):
        Pool.from_frame(df)


def test_non_numeric_column():
    df = _frame(5)
    df["score"] = df["score"].astype(object)
    df.loc[3, "score"] = "high"
    with pytest.raises(PoolError, match=r"column 'score'.*'high'.*row 3"):
        Pool.from_frame(df)


def test_missing_explicit_column_and_duplicate_ids():
    df = _frame(5)
    with pytest.raises(PoolError, match="column 'nope' not found"):
        Pool.from_frame(df, score="nope")
    with pytest.raises(PoolError, match="duplicate id"):
        Pool.from_arrays(scores=np.zeros(3), ids=["a", "b", "a"], threshold=0)


def test_bad_weights():
    with pytest.raises(PoolError, match=r"column 'weight'.*row 1"):
        Pool.from_arrays(scores=np.zeros(3), weights=[1.0, -1.0, 1.0], threshold=0)


def test_index_of_and_unknown_id():
    pool = Pool.from_arrays(scores=np.zeros(3), ids=["a", "b", "c"], threshold=0)
    np.testing.assert_array_equal(pool.index_of(["c", "a"]), [2, 0])
    with pytest.raises(PoolError, match="unknown item id 'zz'"):
        pool.index_of(["a", "zz"])
    p2 = Pool.from_arrays(scores=np.zeros(3), threshold=0)
    with pytest.raises(PoolError, match="unknown item id 7"):
        p2.index_of([1, 7])


def test_multiclass_pool():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    pool = Pool.from_arrays(probs=probs, n_classes=3, labels=[0, 2])
    np.testing.assert_array_equal(pool.preds[:, 0], [0, 2])
    assert pool.probs.shape == (2, 1, 3)
    with pytest.raises(PoolError, match="outside the label set"):
        Pool.from_arrays(probs=probs, n_classes=3, labels=[0, 3])


def test_demo_pool_is_imbalanced_and_labeled():
    pool = demo_pool()
    assert pool.labels is not None
    rate = pool.labels.mean()
    assert 0.0005 < rate < 0.01
