"""What a new user reads when input is refused or taken (the walk of issue "new-user walk"):
on-demand weights and label names, thinned data of several classes, several files in one
ingest, ``already_ingested`` and ``n_rows``, disagreements a rule cannot decide, plurals, the
status line after a skip, and where ``load_pool`` lives.  Every test is fast: nothing here
closes a stage of a model-based design or compiles a posterior (the one that does is slow)."""
import numpy as np
import pandas as pd
import pytest

import bayes_eval as be
from bayes_eval import annotate, annotate_resolve
from bayes_eval.cli import main as cli_main
from bayes_eval.errors import LabelConflictError, MalformedInputError, PoolError, UsageError
from bayes_eval.ondemand_session import OnDemand
from bayes_eval.ondemand_status import counted
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


def _cli(capsys, *argv):
    rc = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_clean_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("bayes-eval: error: ") and "Traceback" not in err, err
    return lines[0]


# ---------------------------------------------------------------------------- ondemand
def _systems(tmp_path, rows):
    f = tmp_path / "w.csv"
    f.write_text("item,weight\n" + "".join(f"{it},{w}\n" for it, w in rows))
    return f


@pytest.mark.parametrize("bad", ["nan", "NaN", "inf", "abc", ""])
def test_ondemand_submit_refuses_a_bad_weight_with_its_row(tmp_path, capsys, bad):
    db = tmp_path / "od.db"
    assert _cli(capsys, "ondemand", "new", db)[0] == 0
    f = _systems(tmp_path, [("cand-1", 1), ("cand-2", bad)])
    rc, out, err = _cli(capsys, "ondemand", "submit", db, "sysW", f)
    line = _one_clean_line(err)
    assert rc == 2 and "row 3" in line and "weight" in line, line
    with OnDemand.open(db) as ev:   # nothing submitted
        assert ev.store.rows("SELECT name FROM systems") == []
        with pytest.raises(MalformedInputError, match="row 3"):
            ev.submit_file("sysW", f)


def test_ondemand_ingest_takes_label_names_with_label_map(tmp_path, capsys):
    db = tmp_path / "od.db"
    assert _cli(capsys, "ondemand", "new", db)[0] == 0
    sys_a = tmp_path / "a.csv"
    sys_a.write_text("item\n" + "".join(f"c{k}\n" for k in range(40)))
    assert _cli(capsys, "ondemand", "submit", db, "A", sys_a)[0] == 0
    assert _cli(capsys, "ondemand", "next", db, "--out", tmp_path / "t.csv")[0] == 0
    items = list(pd.read_csv(tmp_path / "t.csv")["item"])
    lab = tmp_path / "l.csv"
    pd.DataFrame({"item": items, "label": ["yes" if k % 2 else "no" for k in range(len(items))]}).to_csv(lab, index=False)
    rc, out, err = _cli(capsys, "ondemand", "ingest", db, lab)   # the hint names a flag that exists
    assert rc == 2 and "--label-map" in _one_clean_line(err)
    rc, out, err = _cli(capsys, "ondemand", "ingest", db, lab, "--label-map", "no=0,yes=1")
    assert rc == 0 and f"ingested {len(items)} new verification" in out, err
    with OnDemand.open(db) as ev:
        stored = dict(ev.store.rows("SELECT item, label FROM labels"))
    assert stored == {it: k % 2 for k, it in enumerate(items)}
    rc, out, err = _cli(capsys, "ondemand", "ingest", db, lab, "--label-map", "no=0,yes")
    assert rc == 2 and "--label-map" in _one_clean_line(err)


def test_counts_are_pluralized(tmp_path):
    assert (counted(1, "instance"), counted(0, "instance"), counted(3, "unit")) == ("1 instance", "0 instances",
                                                                                     "3 units")
    with OnDemand.create(tmp_path / "od.db") as ev:
        r = ev.submit("one", ["x1"])
    assert r["why"].startswith("one: 1 instance, ") and "1 instances" not in r["why"]


# ---------------------------------------------------------------------------- subsampled
def test_subsampled_names_the_column_and_row_of_a_class_name(tmp_path, capsys):
    f = tmp_path / "multi.csv"
    pd.DataFrame({"item": ["a", "b", "c"], "pred": ["cat", "dog", "dog"], "label": ["0", "1", "dog"],
                  "score": [0.1, 0.2, 0.3]}).to_csv(f, index=False)
    rc, out, err = _cli(capsys, "subsampled", f, "--measure", "accuracy", "--keep-rate", "0.1")
    line = _one_clean_line(err)
    assert rc == 2 and "column 'label', row 2: 'dog' is not a binary label" in line and "0/1 or true/false" in line
    assert "could not convert" not in line


def test_subsampled_reads_true_false_labels(tmp_path, capsys):
    f = tmp_path / "tf.csv"
    pd.DataFrame({"pred": ["true", "False", "1", "0"], "label": ["TRUE", "false", "true", "0"]}).to_csv(f, index=False)
    from bayes_eval.subsampled import check_binary

    frame = pd.read_csv(f, dtype=str)
    assert check_binary(frame["label"]).tolist() == [1, 0, 1, 0]
    assert check_binary(frame["pred"], "pred").tolist() == [1, 0, 1, 0]
    with pytest.raises(PoolError, match=r"column 'score', row 1: 'x' is not a number"):
        from bayes_eval.subsampled import check_finite

        check_finite(np.array(["0.5", "x"], dtype=object), "score")


def test_subsampled_n_total_names_the_flag(tmp_path, capsys):
    f = tmp_path / "log.csv"
    pd.DataFrame({"action": [1, 2, 1, 2], "propensity": [0.5] * 4, "reward": [1.0, 0.0, 1.0, 0.0],
                  "target_action": [1, 1, 1, 2]}).to_csv(f, index=False)
    rc, out, err = _cli(capsys, "subsampled", f, "--measure", "policy-value", "--keep-rate", "0.5", "--n-total", "2")
    line = _one_clean_line(err)
    assert rc == 2 and "--n-total 2 must be at least" in line and "n_total =" not in line


def test_subsampled_frame_takes_a_measure_and_speaks_python():
    from bayes_eval import measures as M
    from bayes_eval import subsampled_frame as F

    df = pd.DataFrame({"pred": [1, 0, 1, 1, 0, 0], "label": [1, 0, 0, 1, 1, 0]})
    # a parameterless catalogue Measure is read as its name: the same columns asked for (the
    # estimate itself, a JAX computation, is the name's: test_subsampled)
    for m in (M.precision(), "precision"):
        with pytest.raises(PoolError, match="no column 'pred'"):
            F.estimate(df.drop(columns="pred"), m, keep_rate=0.5)
    with pytest.raises(UsageError) as info:
        F.estimate(df, "F1", keep_rate=0.5)
    assert str(info.value).startswith("measure must be one of") and "--" not in str(info.value)
    assert info.value.cli.startswith("--measure must be one of")
    with pytest.raises(UsageError, match="bayes_eval.subsampled.measure") as info:
        F.estimate(df, M.mcc(), keep_rate=0.5)
    assert "--" not in str(info.value)
    with pytest.raises(PoolError) as info:
        F.estimate(df, "precision", keep_rate=0.5, n_total=3)
    assert str(info.value).startswith("n_total = 3") and info.value.cli.startswith("--n-total 3")


# ---------------------------------------------------------------------------- session ingest
@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=300, positive_rate=0.2, seed=1)


def _batch_files(tmp_path, pool, s, n=20):
    b = s.next_batch(n)
    items = list(b["item"])
    y = pool.labels[pool.index_of(np.asarray(items))]
    return items, [int(v) for v in y]


def test_a_file_refused_after_others_names_what_was_ingested(tmp_path, capsys, pool):
    pool_file = tmp_path / "pool.parquet"
    pd.DataFrame({"item": pool.ids, "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}).to_parquet(pool_file)
    db = tmp_path / "s.db"
    assert _cli(capsys, "session", "new", db, "--pool", pool_file, "--design", "passive", "--measure", "accuracy")[0] == 0
    assert _cli(capsys, "session", "next", db, "--n", "20", "--out", tmp_path / "b.csv")[0] == 0
    items = list(pd.read_csv(tmp_path / "b.csv")["item"])
    y = [int(v) for v in pool.labels[pool.index_of(np.asarray(items))]]
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    pd.DataFrame({"item": items[:10], "label": y[:10]}).to_csv(good, index=False)
    pd.DataFrame({"item": items[10:12], "label": [y[10], 7]}).to_csv(bad, index=False)
    rc, out, err = _cli(capsys, "session", "ingest", db, good, bad)
    line = _one_clean_line(err)
    assert rc == 2 and "bad.csv: line 3" in line
    assert line.endswith(f"ingested before it and kept (each file is one transaction): {good} (10 new labels)"), line
    s = Session.open(str(db), pool)   # good.csv's labels are kept, bad.csv added nothing
    try:
        assert s.n_labels == 10
    finally:
        s.close()
    rc, out, err = _cli(capsys, "session", "ingest", db, bad)   # alone: no earlier file to name
    assert rc == 2 and "ingested before it" not in _one_clean_line(err)


def test_already_ingested_and_n_rows(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "accuracy", "is", seed=1)
    try:
        items, y = _batch_files(tmp_path, pool, s)
        f = tmp_path / "l.csv"
        pd.DataFrame({"item": items[:5], "label": y[:5]}).to_csv(f, index=False)
        r1 = s.ingest_file(str(f))
        assert (r1.n_new, r1.already_ingested) == (5, False)
        r2 = s.ingest_file(str(f))   # the same content again: nothing new
        assert (r2.n_new, r2.n_duplicate, r2.already_ingested) == (0, 5, True)
        part = tmp_path / "part.csv"   # a subset of what was ingested, another file: nothing new either
        pd.DataFrame({"item": items[2:4], "label": y[2:4]}).to_csv(part, index=False)
        assert s.ingest_file(str(part)).already_ingested
        more = tmp_path / "more.csv"   # one new label among known ones: not "already ingested"
        pd.DataFrame({"item": items[3:6], "label": y[3:6]}).to_csv(more, index=False)
        r = s.ingest_file(str(more))
        assert (r.n_new, r.n_duplicate, r.already_ingested) == (1, 2, False)
        # 11 rows, one item three times (2 × one label, 1 × the other): majority keeps one label
        maj = tmp_path / "maj.csv"
        its = items[6:14] + [items[14]] * 3
        labs = y[6:14] + [y[14], y[14], 1 - y[14]]
        pd.DataFrame({"item": its, "label": labs}).to_csv(maj, index=False)
        r = s.ingest_file(str(maj), resolve="majority")
        assert (r.n_rows, r.n_new, r.n_resolved) == (11, 9, 1)
    finally:
        s.close()


# ---------------------------------------------------------------------------- --resolve
def _recs(rows, meta=None):
    return annotate.LabelRecords([r[0] for r in rows], [r[1] for r in rows], [None] * len(rows),
                                 [f"line {k + 2}" for k in range(len(rows))], 0, "f.csv",
                                 meta if meta is not None else [{"task": None}] * len(rows))


def test_a_tie_does_not_suggest_the_rule_that_failed():
    recs = _recs([("a", "0"), ("a", "1"), ("b", "1")])
    with pytest.raises(LabelConflictError) as info:
        annotate_resolve.resolve(recs, "majority", 2)
    cli = info.value.cli
    assert "rule 'majority' cannot decide: no majority" in cli
    assert "--resolve first;" in cli and "--resolve majority" not in cli and "annotator" not in cli.split("—")[1]
    assert "correct the file to one label per item" in cli
    assert "resolve='first'" in str(info.value) and "--" not in str(info.value)
    with pytest.raises(LabelConflictError) as info:   # a name on a plain file: no annotators to pick by
        annotate_resolve.resolve(recs, "bob", 2)
    cli = info.value.cli
    assert "the file records no annotators" in cli and "none recorded" not in cli
    assert "--resolve first;" in cli and "email" not in cli
    assert annotate_resolve.resolve(recs, "first", 2)[0].labels == ["0", "1"]


def test_a_labeling_tools_disagreement_offers_what_decides_it():
    meta = [{"task": 1, "annotation": 11, "annotator": "ann@x.org"},
            {"task": 1, "annotation": 12, "annotator": "bob@x.org"}]
    recs = _recs([("a", "0"), ("a", "1")], meta)
    with pytest.raises(LabelConflictError) as info:
        annotate_resolve.resolve(recs, "error", 2)
    cli = info.value.cli
    # no annotation marked ground truth: --resolve ground-truth cannot decide, so it is not offered
    assert ("--resolve first or an annotator's email (ann@x.org, bob@x.org);" in cli
            and "reconcile them in the labeling tool;" in cli and "ground" not in cli), cli
    # Label Studio's JSON export says per annotation whether it is ground truth: none is, and marking one
    # in the tool is a way to reconcile; one marked: the rule decides, and is offered
    flagged = [dict(m, ground_truth=False) for m in meta]
    with pytest.raises(LabelConflictError) as info:
        annotate_resolve.resolve(_recs([("a", "0"), ("a", "1")], flagged), "error", 2)
    assert ("(or mark one annotation as ground truth there, export or pull again and --resolve ground-truth); "
            "or a rule that decides this item: --resolve first or an annotator's email" in info.value.cli), info.value.cli
    assert "resolve='ground-truth')" in str(info.value) and "--resolve" not in str(info.value)
    flagged[1]["ground_truth"] = True
    with pytest.raises(LabelConflictError) as info:
        annotate_resolve.resolve(_recs([("a", "0"), ("a", "1")], flagged), "error", 2)
    assert "--resolve ground-truth, first or an annotator's email" in info.value.cli and "mark one" not in info.value.cli
    assert annotate_resolve.resolve(_recs([("a", "0"), ("a", "1")], flagged), "ground-truth", 2)[0].labels == ["1"]
    # three annotators on item a (2 × 1, 1 × 0), dan on item b only: the rule 'dan@x.org' cannot decide a
    meta3 = meta + [{"task": 1, "annotation": 13, "annotator": "cid@x.org"},
                    {"task": 2, "annotation": 14, "annotator": "dan@x.org"}]
    recs3 = _recs([("a", "0"), ("a", "1"), ("a", "1"), ("b", "1")], meta3)
    with pytest.raises(LabelConflictError) as info:
        annotate_resolve.resolve(recs3, "dan@x.org", 2)
    assert ("annotator 'dan@x.org' did not annotate it" in info.value.cli and "--resolve majority, "
            "first or an annotator's email (ann@x.org, bob@x.org, cid@x.org);" in info.value.cli), info.value.cli


# ---------------------------------------------------------------------------- skip, API
def test_status_after_a_skip_says_what_each_interval_is_of(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "accuracy", "passive", seed=1)
    try:
        items, _ = _batch_files(tmp_path, pool, s, n=5)
        s.skip(items[:1])
        note = s.status(bayesian=False)["skipped_note"]
    finally:
        s.close()
    assert "1 item(s) skipped as impossible to label: the estimate and its CLT-based intervals are of the measure " \
           "on the items that can be labeled" in note and "Bayesian" not in note


@pytest.mark.slow
def test_status_after_a_skip_says_the_bayesian_interval_is_of_the_whole_pool(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "accuracy", "ais", seed=1)
    try:
        items, y = _batch_files(tmp_path, pool, s, n=10)
        s.skip(items[:1])
        s.add_labels(items[1:], y[1:])
        st = s.status(bayesian=True)
    finally:
        s.close()
    assert any("bayes_lower" in c for c in st["estimates"])
    assert "the Bayesian interval is of the measure on the whole pool, skipped items included" in st["skipped_note"]


def test_load_pool_is_the_packages(tmp_path):
    from bayes_eval import registry

    assert be.load_pool is registry.load_pool and "load_pool" in be.__all__
    f = tmp_path / "multi_probs.csv"
    p = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.2, 0.2, 0.5, 0.1], [0.1, 0.1, 0.1, 0.7]])
    pd.DataFrame({"item": list("abcd"), "pred": ["cat", "dog", "bird", "fish"], "label": ["cat", "dog", "dog", "fish"],
                  **{f"p_{c}": p[:, k] for k, c in enumerate(["cat", "dog", "bird", "fish"])}}).to_csv(f, index=False)
    lm = {"cat": 0, "dog": 1, "bird": 2, "fish": 3}
    cols = ["p_cat", "p_dog", "p_bird", "p_fish"]
    a = be.load_pool(str(f), n_classes=4, label_map=lm, columns={"prob": cols})
    b = be.Pool.from_file(str(f), n_classes=4, label_map=lm, prob=cols)   # from_file: from_frame's keywords
    assert a.n_classes == b.n_classes == 4 and a.labels.tolist() == b.labels.tolist() == [0, 1, 1, 3]


@pytest.mark.parametrize("oracle", ["deterministic", "stochastic"])
def test_one_label_gives_no_clt_interval(tmp_path, pool, oracle):
    """A variance needs two labels: after one, the CLT interval and standard error are
    undefined (they read [v, v] with a standard error of 0: stop 82's walk), and defined again
    after the next stage."""
    s = Session.create(str(tmp_path / "s.db"), pool, ["f1", "accuracy"], "passive", seed=1, oracle=oracle)
    b = s.next_batch(1)
    s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    summ = s.summary()
    assert s.n_labels == 1 and summ["std_error"].isna().all(), summ
    clt = s.intervals(bayesian=False)
    assert clt["lower"].isna().all() and clt["upper"].isna().all(), clt
    st = s.status(bayesian=False)
    assert all(c["std_error"] is None and c.get("clt_lower") is None for c in st["estimates"]), st["estimates"]
    b = s.next_batch(30)
    s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    summ = s.summary()
    assert (summ["std_error"] > 0).all() and s.intervals(bayesian=False)["lower"].notna().all()
    s.close()


def test_resolve_on_a_stochastic_session_says_it_was_not_used(tmp_path, capsys, pool):
    """``--resolve`` names a rule for disagreements; a stochastic oracle takes every annotation as
    a label, so the rule is not used -- said on a line, not taken silently (stop 82's walk)."""
    f = tmp_path / "pool.csv"
    pd.DataFrame({"item": pool.ids, "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}).to_csv(f, index=False)
    db = str(tmp_path / "s.db")
    assert _cli(capsys, "session", "new", db, "--pool", f, "--design", "passive", "--oracle", "stochastic")[0] == 0
    assert _cli(capsys, "session", "next", db, "--n", "4", "--out", tmp_path / "b.csv")[0] == 0
    b = pd.read_csv(tmp_path / "b.csv")
    pd.DataFrame({"item": b["item"], "label": 1}).to_csv(tmp_path / "l.csv", index=False)
    rc, out, err = _cli(capsys, "session", "ingest", db, tmp_path / "l.csv", "--resolve", "majority")
    assert rc == 0 and "4 new label(s)" in out and "--resolve majority was not used" in out, (out, err)
    rc, out, err = _cli(capsys, "session", "ingest", db, tmp_path / "l.csv")
    assert rc == 0 and "not used" not in out, out


def test_the_session_usage_line_names_every_command(capsys):
    """``bayes-eval session`` with no command lists them all (``correct`` was missing)."""
    import re

    from bayes_eval.session_team_cli import TEAM_COMMANDS

    with pytest.raises(SystemExit) as e:
        cli_main(["session"])
    err = capsys.readouterr().err
    named = set(re.search(r"\{([a-z,-]+)\}", err).group(1).split(","))
    assert e.value.code == 2 and named == {"new", "next", "ingest", "status", "report", *TEAM_COMMANDS}, err


def test_a_label_outside_the_set_names_every_accepted_value():
    """true / false are read as labels of a binary pool, so the refusal lists them (it listed
    '0', '1' only: stop 82's walk)."""
    with pytest.raises(be.errors.InvalidLabelError) as e:
        annotate.parse_labels(["2"], 2, {"0": 0, "1": 1}, ["line 2"])
    assert "accepted values: '0', '1', true, false" in str(e.value)
    assert annotate.parse_labels(["TRUE", "false"], 2, {"0": 0, "1": 1}, ["a", "b"]).tolist() == [1, 0]
