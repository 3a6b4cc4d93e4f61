"""What a new user is told about their own files (a new-user walk): errors name the user's own
column and flag, with the closest column and the fix; a pool read in a way its user may not
expect says so in a note (percentages, a stray confidence above 1, predictions that are not
the probabilities' top class, a ground-truth column read without); an exact posterior is drawn
as the point it is.  Every test here is fast: pools are read, no session is fitted."""
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_eval import registry
from bayes_eval.checks import check_label_map, class_names_hint, zero_padded_hint
from bayes_eval.cli import main
from bayes_eval.errors import PoolError, cli_message
from bayes_eval.pool import Pool
from bayes_eval.registry import load_pool

CLASSES = "cat=0,dog=1,bird=2,fish=3"
NAMES = np.array(["cat", "dog", "bird", "fish"])


def _pairs(n=40, seed=0):
    """A binary pool as an entity-resolution user has it: ids in ``pair_id``, scores in ``prob``,
    predictions as names in ``predicted``."""
    rng = np.random.default_rng(seed)
    prob = rng.random(n)
    return pd.DataFrame({"pair_id": [f"P{i:06d}" for i in range(n)], "prob": prob,
                         "predicted": np.where(prob >= 0.5, "match", "non-match"), "title": [f"t{i}" for i in range(n)]})


def _docs(n=60, seed=1):
    """A pool of four classes: ids in ``doc_id``, names in ``predicted``, the truth in ``gold``, the
    class probabilities in ``p_cat`` .. ``p_fish``."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(4), size=n)
    top = p.argmax(1)
    return pd.DataFrame({"doc_id": [f"doc-{i:05d}" for i in range(n)], "text": [f"t{i}" for i in range(n)],
                         "predicted": NAMES[top], "confidence": p.max(1), "gold": NAMES[rng.integers(0, 4, n)],
                         **{f"p_{c}": p[:, j] for j, c in enumerate(NAMES)}})


def _csv(tmp_path, df, name="pool.csv"):
    path = tmp_path / name
    df.to_csv(path, index=False)
    return str(path)


def _cli(capsys, *argv):
    rc = main(list(argv))
    err = capsys.readouterr().err
    return rc, err


PAIRS = ["--id-column", "pair_id", "--score-column", "prob", "--pred-column", "predicted",
         "--label-map", "non-match=0,match=1"]


# 1 ------------------------------------------------------------------ the user's column, not the role's
def test_id_errors_name_the_users_id_column(tmp_path, capsys):
    df = _pairs()
    dup = df.copy()
    dup.loc[10, "pair_id"] = dup.loc[3, "pair_id"]
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, dup), *PAIRS)
    assert rc == 2 and "column 'pair_id': duplicate id 'P000003' at row 10" in err, err
    blank = df.copy()
    blank.loc[10, "pair_id"] = None
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "b.db"), "--pool", _csv(tmp_path, blank, "b.csv"), *PAIRS)
    assert rc == 2 and "column 'pair_id': missing id at row 10" in err, err
    assert not (tmp_path / "a.db").exists() and not (tmp_path / "b.db").exists()


def test_value_errors_name_the_users_column(tmp_path):
    df = _docs()
    num = df.assign(predicted=np.where(np.arange(len(df)) == 5, 4, df["predicted"].map(dict(zip(NAMES, range(4))))))
    with pytest.raises(PoolError, match=r"^column 'predicted': value 4 at row 5"):
        load_pool(_csv(tmp_path, num), id_column="doc_id", columns={"pred": "predicted", "score": "confidence"},
                  n_classes=4)
    nan = df.copy()
    nan.loc[3, "p_dog"] = np.nan
    probs = {"pred": "predicted", "prob": [f"p_{c}" for c in NAMES]}
    with pytest.raises(PoolError, match=r"^column 'p_dog': non-finite value nan at row 3"):
        load_pool(_csv(tmp_path, nan, "nan.csv"), id_column="doc_id", columns=probs, n_classes=4,
                  label_map=dict(zip(NAMES, range(4))))
    out = df.copy()
    out.loc[7, "p_bird"] = 1.5
    with pytest.raises(PoolError, match=r"^column 'p_bird': value outside \[0, 1\] at row 7"):
        load_pool(_csv(tmp_path, out, "out.csv"), id_column="doc_id", columns=probs, n_classes=4,
                  label_map=dict(zip(NAMES, range(4))))


def test_a_label_map_past_the_classes_names_the_map_and_the_classes(tmp_path, capsys):
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, _docs()),
                   "--id-column", "doc_id", "--pred-column", "predicted", "--score-column", "confidence",
                   "--classes", "4", "--measure", "accuracy", "--label-map", "cat=0,dog=1,bird=2,fish=4")
    assert rc == 2 and "--label-map gives fish=4, outside the classes 0..3" in err and "--classes 5" in err, err
    with pytest.raises(PoolError, match="the label map gives fish=4") as e:
        Pool.from_frame(_docs(), item="doc_id", pred="predicted", score="confidence", n_classes=4,
                        label_map={"cat": 0, "dog": 1, "bird": 2, "fish": 4})
    assert "n_classes=5" in str(e.value)


# 2 ------------------------------------------------------------------ a column not found: the flag, the closest
@pytest.mark.parametrize("flag, given, close", [("--id-column", "pairid", "pair_id"),
                                                ("--score-column", "proba", "prob"),
                                                ("--pred-column", "Predicted", "predicted")])
def test_a_column_not_found_names_the_flag_and_the_closest_column(tmp_path, capsys, flag, given, close):
    argv = list(PAIRS)
    argv[argv.index(flag) + 1] = given
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, _pairs()), *argv)
    assert rc == 2 and f"{flag} {given}: column {given!r} not found" in err and f"did you mean {close!r}?" in err, err
    assert err.count("\n") == 1


def test_a_column_not_found_in_python_names_the_keyword(tmp_path):
    with pytest.raises(PoolError, match=r"item='pairid': column 'pairid' not found.*did you mean 'pair_id'"):
        Pool.from_frame(_pairs(), item="pairid", score="prob", pred=None, threshold=0.5)
    with pytest.raises(PoolError, match=r"not found; columns are \[.*\]$"):   # nothing close: no guess
        Pool.from_frame(_pairs(), item="pair_id", score="zzz", pred=None, threshold=0.5)


# 3 ------------------------------------------------------------------ a partly filled ground-truth column
def test_a_partial_label_column_is_read_without_and_said(tmp_path, capsys):
    rng = np.random.default_rng(2)
    s = rng.random(50)
    lab = np.where(rng.random(50) < 0.3, np.nan, (s > 0.5).astype(float))
    lab[0] = np.nan
    path = _csv(tmp_path, pd.DataFrame({"item": range(50), "score": s, "pred": (s >= 0.5).astype(int), "label": lab}))
    pool = load_pool(path)
    assert pool.labels is None
    note = [n for n in pool.notes if "column 'label'" in n]
    assert note and f"{int(np.isnan(lab).sum())} of 50 labels missing (first at row 0)" in note[0], pool.notes
    assert "a session never uses it" in note[0]
    # a simulation needs them: refused, naming why
    rc, err = _cli(capsys, "simulate", path, "--repeats", "1")
    assert rc == 2 and "simulation needs every item's true label" in err and "labels missing" in err, err
    # the labels that are there are still checked
    bad = lab.copy()
    bad[3] = 2
    with pytest.raises(PoolError, match=r"column 'label': value 2 at row 3"):
        Pool.from_frame(pd.DataFrame({"score": s, "pred": (s >= 0.5).astype(int), "label": bad}))


# 4 ------------------------------------------------------------------ label maps
def test_a_label_map_giving_two_names_one_class_is_refused(tmp_path, capsys):
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, _docs()),
                   "--id-column", "doc_id", "--pred-column", "predicted", "--score-column", "confidence",
                   "--classes", "4", "--measure", "accuracy", "--label-map", "cat=0,dog=1,bird=2,fish=2")
    assert rc == 2 and "'bird' and 'fish' the same class 2 while class 3 has no name" in err, err
    check_label_map({"yes": 1, "y": 1, "no": 0}, 2)   # synonyms: every class has a name
    with pytest.raises(PoolError, match="classes 0, 2 have no name"):
        check_label_map({"a": 1, "b": 1}, 3)


def test_the_label_map_hint_lists_every_class_name(tmp_path, capsys):
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, _docs()),
                   "--id-column", "doc_id", "--pred-column", "predicted", "--score-column", "confidence",
                   "--classes", "4", "--measure", "accuracy")
    assert rc == 2 and all(f"{c}=?" in err for c in NAMES), err
    many = class_names_hint([f"c{i}" for i in range(25)])
    assert "c19=?" in many and "c20=?" not in many and "(and 5 more names)" in many


# 5 ------------------------------------------------------------------ a measure by its name
def test_a_measure_error_names_the_measure_not_its_spec(tmp_path, capsys):
    pool = Pool.from_arrays(preds=np.arange(40) % 4, scores=np.linspace(0.3, 0.9, 40), n_classes=4)
    with pytest.raises(ValueError) as e:
        registry.parse_measure_specs("f1", pool)
    assert "{" not in str(e.value) and str(e.value).startswith("f1 is a measure of two classes"), str(e.value)
    rc, err = _cli(capsys, "session", "new", str(tmp_path / "a.db"), "--pool", _csv(tmp_path, _docs()),
                   "--id-column", "doc_id", "--pred-column", "predicted", "--score-column", "confidence",
                   "--classes", "4", "--label-map", CLASSES, "--measure", "f1")
    assert rc == 2 and "{'name'" not in err and "f1 is a measure of two classes" in err, err


# 6 ------------------------------------------------------------------ simulate without a 'label' column
def test_simulate_without_a_label_column_names_the_flag_and_candidates(tmp_path, capsys):
    rc, err = _cli(capsys, "simulate", _csv(tmp_path, _docs()), "--id-column", "doc_id", "--pred-column", "predicted",
                   "--score-column", "confidence", "--classes", "4", "--label-map", CLASSES, "--format", "json")
    assert rc == 2 and "--label-column NAME" in err and "candidates: gold" in err, err
    assert "text" not in err.split("candidates:")[1]   # one value per row: not a label column


# 7 ------------------------------------------------------------------ ids that lost their zeros
def test_an_unknown_id_that_lost_its_leading_zeros_gets_a_hint():
    ids = np.array([f"{i:05d}" for i in range(550, 560)], dtype=object)
    pool = Pool.from_arrays(scores=np.linspace(0.1, 0.9, 10), preds=np.arange(10) % 2, ids=ids)
    with pytest.raises(PoolError, match=r"unknown item id '554' .*zero-padded, e.g. '00554'.*spreadsheet"):
        pool.index_of(np.array(["554"], dtype=object))
    with pytest.raises(PoolError) as e:
        pool.index_of(np.array(["99"], dtype=object))
    assert "zero-padded" not in str(e.value)
    assert "'00554'" in zero_padded_hint(554, ids) and "'00554'" in zero_padded_hint(554.0, ids)
    assert zero_padded_hint("abc", ids) == "" and zero_padded_hint(554, np.arange(600)) == ""


# 8 ------------------------------------------------------------------ scores read as margins that may not be
def test_percentage_scores_get_a_note():
    s = np.linspace(2, 98, 200)
    pool = Pool.from_arrays(scores=s, preds=(s >= 50).astype(int))
    assert pool.score_kind == "margin"
    note = [n for n in pool.notes if "percentages" in n]
    assert note and "[0, 100]" in note[0] and "--score-kind" in note[0], pool.notes
    said = Pool.from_arrays(scores=s, preds=(s >= 50).astype(int), score_kind="margin")
    assert not any("percentages" in n for n in said.notes)   # said so: no note
    margins = Pool.from_arrays(scores=s - 50, preds=(s >= 50).astype(int))
    assert not any("percentages" in n or "outside [0, 1]" in n for n in margins.notes)


def test_a_stray_confidence_above_one_is_named(tmp_path):
    df = _docs(n=300)
    df.loc[9, "confidence"] = 1.7
    pool = load_pool(_csv(tmp_path, df), id_column="doc_id", columns={"pred": "predicted", "score": "confidence"},
                     n_classes=4, label_map=dict(zip(NAMES, range(4))))
    assert pool.score_kind == "margin"
    note = [n for n in pool.notes if "outside [0, 1]" in n]
    assert note and "column 'confidence': 1 of 300 scores" in note[0] and "1.7 at row 9 (item 'doc-00009')" in note[0]


# 9 ------------------------------------------------------------------ predictions that are not the top class
def test_predictions_other_than_the_probabilities_top_class_are_counted(tmp_path):
    df = _docs()
    df.loc[3, "predicted"] = NAMES[(NAMES.tolist().index(df.loc[3, "predicted"]) + 1) % 4]
    cols = {"pred": "predicted", "prob": [f"p_{c}" for c in NAMES]}
    pool = load_pool(_csv(tmp_path, df), id_column="doc_id", columns=cols, n_classes=4,
                     label_map=dict(zip(NAMES, range(4))))
    note = [n for n in pool.notes if "disagrees" in n]
    assert note and "column 'predicted' disagrees" in note[0] and "on 1 of 60 rows (first: row 3" in note[0], pool.notes
    clean = load_pool(_csv(tmp_path, _docs(), "clean.csv"), id_column="doc_id", columns=cols, n_classes=4,
                      label_map=dict(zip(NAMES, range(4))))
    assert not any("disagrees" in n for n in clean.notes)


# 10 ----------------------------------------------------------------- an exact posterior is a point
class _ExactSession:
    """What plot_session_posterior reads of a session whose every item that matters is labeled."""
    components = ["f1"]
    design_name = "ais"

    def posterior(self):
        return np.full((200, 1), 0.625)

    def intervals(self, level, bayesian=True):
        return pd.DataFrame({"component": ["f1", "f1"], "kind": ["bayes", "clt"],
                             "lower": [0.625, 0.625], "upper": [0.625, 0.625]})

    def snapshots(self):
        return [type("Snap", (), {"labels": 300})()]

    def estimate(self):
        return pd.Series([0.625])


def test_an_exact_posterior_is_drawn_as_a_point_without_warnings():
    from bayes_eval.plots import plot_session_posterior, session_posterior_view

    lo, hi, note = session_posterior_view(np.full(200, 0.625), [(0.625, 0.625)], 0.625)
    assert lo < 0.625 < hi and abs((0.625 - lo) - (hi - 0.625)) < 1e-12 and note == ""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_session_posterior(_ExactSession(), None)
    ax = fig.axes[0]
    a, b = ax.get_xlim()
    assert a < 0.625 < b and abs((0.625 - a) - (b - 0.625)) < 1e-9
    assert "exact: every item that can change the measure is labeled" in ax.get_title()
    assert not ax.patches   # no histogram bar filling the frame


def test_messages_speak_the_interface_they_came_from():
    with pytest.raises(PoolError) as e:
        Pool.from_frame(_pairs(), item="pair_id", score="proba", pred=None, threshold=0.5)
    assert str(e.value).startswith("score='proba'") and cli_message(e.value).startswith("--score-column proba")
