"""Bad input, everywhere (issue 14, item 5): every refused command or call names the
problem in plain values, speaks the interface it came from (flags on the command line,
Python names in the API), is checked before anything runs, and changes nothing; an I/O
failure is reported as what it is."""
import json
import os
import sqlite3

import numpy as np
import pandas as pd
import pytest

from bayes_eval import annotate
from bayes_eval.cli import main as cli_main
from bayes_eval.errors import cli_message
from bayes_eval.pool import PoolError, demo_pool
from bayes_eval.session import (
    LabelConflictError,
    MalformedInputError,
    NotDrawnError,
    Session,
    SessionError,
)
from bayes_eval.store import Store


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=600, positive_rate=0.08, seed=5)


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory, pool):
    p = tmp_path_factory.mktemp("pool") / "pool.csv"
    pd.DataFrame({"item": np.arange(pool.n_items), "score": pool.scores[:, 0], "pred": pool.preds[:, 0],
                  "label": pool.labels}).to_csv(p, index=False)
    return str(p)


def _cli(capsys, *argv):
    rc = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _new(capsys, db, pool_file, *extra):
    rc, out, err = _cli(capsys, "session", "new", db, "--pool", pool_file, "--design", "is", "--strata", "8",
                        *extra)
    assert rc == 0, err
    return out


def _stages(db):
    with sqlite3.connect(db) as c:
        return c.execute("SELECT count(*) FROM stages").fetchone()[0], \
            json.loads(c.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0])


def _no_replay(monkeypatch):
    """Any opening of a session from here on fails the test: argument errors must come first."""
    def refuse(*a, **k):
        raise AssertionError("the session was opened (replayed) before the arguments were checked")

    monkeypatch.setattr(Session, "open", classmethod(lambda cls, *a, **k: refuse()))


# ---------------------------------------------------------------------------- 1. a failed next writes nothing
def test_failed_next_records_no_stage(tmp_path, capsys, pool_file, pool):
    db = str(tmp_path / "s.db")
    _new(capsys, db, pool_file)
    before = _stages(db)
    rc, out, err = _cli(capsys, "session", "next", db, "--n", "10", "--out", tmp_path / "missing" / "b.csv")
    assert rc == 2 and "folder" in err and "does not exist" in err and "Traceback" not in err
    assert _stages(db) == before
    # the API: the output is checked before drawing, and a write that fails after the draw
    # (disk full, ...) leaves no stage either, nor a file
    s = Session.open(db)
    dump = s._store.dump()
    with pytest.raises(SessionError, match="does not exist"):
        s.export_batch(str(tmp_path / "missing" / "b.csv"), 10)

    def full(*a, **k):
        raise SessionError("cannot write b.csv: disk full")

    real = annotate.write_batch_tmp
    annotate.write_batch_tmp = full
    try:
        with pytest.raises(SessionError, match="disk full"):
            s.export_batch(str(tmp_path / "b.csv"), 10)
    finally:
        annotate.write_batch_tmp = real
    assert s._store.dump() == dump and s.n_pending == 0 and not (tmp_path / "b.csv").exists()
    # the session file cannot take the stage (disk full): no stage, and no batch file
    s._store._conn.execute(f"PRAGMA max_page_count = {s._store.pragma('page_count')}")
    with pytest.raises(SessionError, match="disk full") as info:
        s.export_batch(str(tmp_path / "b.csv"), 400)  # more draws than the file's free pages hold
    assert "not a bayes_eval session" not in str(info.value) and "nothing was written" in str(info.value)
    assert not (tmp_path / "b.csv").exists() and not list(tmp_path.glob("b.csv.tmp-*"))
    s._store._conn.execute("PRAGMA max_page_count = 1073741823")
    assert s._store.dump() == dump and s.n_pending == 0
    df = s.export_batch(str(tmp_path / "b.csv"), 10)  # and it works once there is room
    assert len(df) == 10 and pd.read_csv(tmp_path / "b.csv")["item"].tolist() == df["item"].tolist()
    s.close()
    assert _stages(db)[0] == before[0] + 1


# ---------------------------------------------------------------------------- 2. option values
@pytest.mark.parametrize("argv, flag", [
    (["session", "new", "{db2}", "--pool", "{pool}", "--eps", "-1"], "--eps must be in (0, 1], got -1"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--label-map", "yes=1,yes=0"], "--label-map"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--strata", "0"], "--strata must be >= 1, got 0"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--depth", "0"], "--depth must be >= 1"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--lam", "1.5"], "--lam must be in [0, 1], got 1.5"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--delta", "1"], "--delta must be in [0, 1), got 1"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--audit-floor", "1.5"], "--audit-floor must be in [0, 1), got 1.5"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--design", "stratified", "--audit-floor", "0.1"],
     "--audit-floor applies to the ais design, not to 'stratified'"),
    (["simulate", "{pool}", "--audit-floor", "-0.1"], "--audit-floor must be in [0, 1), got -0.1"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--thresholds", "1"], "--thresholds must be >= 2"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--seed", "-2"], "--seed must be a non-negative integer"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--threshold", "nan"], "--threshold must be a finite number"),
    (["session", "new", "{db2}", "--pool", "{pool}", "--design", "poisson-adaptive", "--poisson-option",
      "em_iters=0"], "--poisson-option em_iters must be a positive integer"),
    (["session", "next", "{db}", "--n", "0"], "--n must be a positive integer, got 0"),
    (["session", "next", "{db}", "--n", "-3", "--out", "b.csv"], "--n must be a positive integer, got -3"),
    (["session", "next", "{db}", "--out", "b.txt"], "name the file .csv, .jsonl or .json"),
    (["session", "status", "{db}", "--level", "1"], "--level must be in (0, 1), got 1"),
    (["session", "status", "{db}", "--target-width", "0"], "--target-width must be > 0, got 0"),
    (["session", "report", "{db}", "--out", "{pool}"], "a file of that name exists"),
    (["session", "ingest", "{db}", "{tmp}/missing.csv"], "labels file not found"),
    (["session", "ingest", "{db}", "{tmp}/bad.csv"], "no 'label' column"),
    (["simulate", "{pool}", "--repeats", "0"], "--repeats must be a positive integer, got 0"),
    (["simulate", "{pool}", "--budget", "-5"], "--budget must be a positive integer, got -5"),
    (["simulate", "{pool}", "--batch", "0"], "--batch must be a positive integer, got 0"),
    (["simulate", "{pool}", "--checkpoints", "0,10"], "--checkpoints must be positive"),
    (["simulate", "{pool}", "--checkpoints", "500,3000"], "--checkpoints 3000: past --budget 2000"),
    (["simulate", "{pool}", "--budget", "100", "--batch", "500"], "--batch 500 is more than --budget 100"),
    (["simulate", "{pool}", "--bayes-draws", "10"], "--bayes-draws must be >= 40"),
    (["demo", "--budget", "0"], "--budget must be a positive integer, got 0"),
])
def test_bad_option_values_are_refused_before_anything_runs(tmp_path, capsys, monkeypatch, pool_file, argv, flag):
    db = str(tmp_path / "s.db")
    Store.create(db, {"config": {}}).close()  # a session file; it must not even be opened
    (tmp_path / "bad.csv").write_text("item,lab\n1,0\n")
    fill = {"db": db, "db2": str(tmp_path / "new.db"), "pool": pool_file, "tmp": str(tmp_path)}
    argv = [a.format(**fill) for a in argv]
    _no_replay(monkeypatch)
    import bayes_eval.registry as registry

    monkeypatch.setattr(registry, "load_pool", lambda *a, **k: pytest.fail("the pool was read first"))
    rc, out, err = _cli(capsys, *argv)
    assert rc == 2 and flag in err, err
    assert "Traceback" not in err and "np." not in err
    assert not os.path.exists(tmp_path / "new.db")


def test_label_map_with_a_name_mapped_twice_is_refused():
    with pytest.raises(SessionError, match="'yes' is mapped twice, to 1 and to 0"):
        annotate.parse_label_map("yes=1,yes=0")
    assert annotate.parse_label_map("yes=1, yes=1,no=0") == {"yes": 1, "no": 0}  # the same twice is harmless
    with pytest.raises(SessionError, match="no name"):
        annotate.parse_label_map("=1")


# ---------------------------------------------------------------------------- 3. I/O failures
def test_a_file_that_is_not_sqlite_is_not_a_session(tmp_path):
    f = tmp_path / "pool.csv"
    f.write_text("item,score\n" + "\n".join(f"{i},{i}" for i in range(200)))
    with pytest.raises(SessionError, match="not a bayes_eval session file \\(not an SQLite database\\)"):
        Store.open(str(f))
    with pytest.raises(SessionError, match="is a folder"):
        Store.open(str(tmp_path))


def test_io_failures_are_not_reported_as_a_foreign_file(tmp_path, monkeypatch, pool):
    path = str(tmp_path / "s.db")
    Session.create(path, pool, "f1", "passive", n_strata=8).close()

    def fail(p):
        err = sqlite3.OperationalError("disk I/O error")
        err.sqlite_errorname = "SQLITE_IOERR"
        raise err

    monkeypatch.setattr(Store, "_connect", staticmethod(fail))
    with pytest.raises(SessionError) as info:
        Store.open(path)
    assert "cannot open session file" in str(info.value) and "disk I/O error" in str(info.value)
    assert "not a bayes_eval session" not in str(info.value)
    with pytest.raises(SessionError, match="cannot create session file .*disk I/O error"):
        Store.create(str(tmp_path / "t.db"), {})
    assert not os.path.exists(tmp_path / "t.db")


def test_read_only_folder_is_permission_denied(tmp_path, capsys, pool, pool_file):
    ro = tmp_path / "ro"
    ro.mkdir()
    path = str(ro / "s.db")
    Session.create(path, pool, "f1", "passive", n_strata=8).close()
    os.chmod(ro, 0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a read-only folder is still writable")
        with pytest.raises(SessionError, match="permission denied") as info:
            Session.create(str(ro / "t.db"), pool, "f1", "passive")
        assert "not a bayes_eval session" not in str(info.value)
        rc, out, err = _cli(capsys, "session", "new", ro / "t.db", "--pool", pool_file)
        assert rc == 2 and "cannot create session file" in err and "permission denied" in err
        rc, out, err = _cli(capsys, "session", "status", path)
        assert rc == 2 and "permission denied" in err and "not a bayes_eval session" not in err
    finally:
        os.chmod(ro, 0o755)


# ---------------------------------------------------------------------------- 4. a fully labeled pool
def test_fully_labeled_pool_says_so(tmp_path, capsys):
    small = demo_pool(n_items=60, positive_rate=0.3, seed=2)
    db = str(tmp_path / "s.db")
    s = Session.create(db, small, "f1", "is", seed=0, n_strata=4)
    s.run(lambda b: small.labels[small.index_of(b["item"].to_numpy())], budget=small.n_items, batch=20)
    assert s.n_labels == small.n_items and s.fully_labeled and s.next_batch(5).empty
    p, y = small.preds[:, 0], small.labels
    tp = int(((p == 1) & (y == 1)).sum())
    f1 = 2 * tp / (int((p == 1).sum()) + int((y == 1).sum()))
    assert 0 < f1 < 1
    assert s.exact_values()["f1"] == pytest.approx(f1, rel=1e-12)
    stop = s.stopping(0.001)
    assert stop["reached"] and stop["more_labels"] == 0 and stop["exact"]
    assert "every item" in stop["note"] and "label more" not in stop["note"]
    st = s.status(target_width=0.001)
    assert st["fully_labeled"] and st["exact"]["f1"] == pytest.approx(f1, rel=1e-12)
    s.close()
    f = tmp_path / "pool.parquet"
    pd.DataFrame({"score": small.scores[:, 0], "pred": small.preds[:, 0]}).to_parquet(f)
    rc, out, err = _cli(capsys, "session", "status", db, "--pool", f, "--target-width", "0.001", "--no-bayesian")
    assert rc == 0, err
    assert "every item of the pool is labeled" in out and "label more" not in out and f"{f1:.4f}" in out
    assert "next stage:" not in out   # no line about where the next stage's draws would go
    rc, out, err = _cli(capsys, "session", "next", db, "--pool", f, "--out", tmp_path / "b.csv")
    assert rc == 0 and "every item of the pool is labeled" in out and "exhausted" not in out


# ---------------------------------------------------------------------------- 5. plain values
def test_messages_print_plain_values(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "passive", seed=0, n_strata=8)
    b = s.next_batch(5)
    never = next(i for i in range(pool.n_items) if i not in set(b["item"]))
    for call in (lambda: s.add_labels([np.int64(never)], [np.int64(1)]),
                 lambda: s.add_labels(np.asarray([b["item"][0], b["item"][0]]), np.asarray([0.0, 1.0])),
                 lambda: s.add_labels([np.int64(b["item"][0])], [np.float64(2.0)])):
        with pytest.raises(SessionError) as info:
            call()
        assert "np." not in str(info.value), str(info.value)
    with pytest.raises(NotDrawnError, match=f"item {never} was never drawn"):
        s.add_labels([np.int64(never)], [1])
    with pytest.raises(SessionError, match="got 0$") as info:
        s.close()
        s = Session.open(str(tmp_path / "s.db"), pool)
        s._open = None
        s.next_batch(np.int64(0))
    with pytest.raises(SessionError, match="got -1") as info:
        Session.create(str(tmp_path / "t.db"), pool, "f1", "passive", seed=np.int64(-1))
    assert "np." not in str(info.value)


# ---------------------------------------------------------------------------- 6. disagreeing annotators
def test_disagreement_names_both_annotations(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "passive", seed=0, n_strata=8)
    f = tmp_path / "tasks.json"
    s.export_batch(str(f), n=3)
    tasks = json.loads(f.read_text())
    for k, t in enumerate(tasks):
        t["id"] = 100 + k

        def ann(aid, who, choice):
            return {"id": aid, "completed_by": who, "was_cancelled": False,
                    "result": [{"from_name": "label", "to_name": "item", "type": "choices",
                                "value": {"choices": [choice]}}]}

        t["annotations"] = [ann(500 + k, 7, "positive"),
                            ann(600 + k, {"email": "bob@example.org"}, "negative" if k == 1 else "positive")]
    e = tmp_path / "export.json"
    e.write_text(json.dumps(tasks))
    before = s._store.dump()
    with pytest.raises(LabelConflictError) as info:
        s.ingest_file(str(e), label_map={"negative": 0, "positive": 1})
    msg = str(info.value)
    item = tasks[1]["data"]["item"]
    for part in (f"item {item!r}", "task id 101", "annotation 1 (id 501) by user 7", "'positive' (label 1)",
                 "annotation 2 (id 601) by bob@example.org", "'negative' (label 0)", "oracle='stochastic'"):
        assert part in msg, (part, msg)
    assert "--oracle" in cli_message(info.value) and "oracle='stochastic'" not in cli_message(info.value)
    assert s._store.dump() == before


# ---------------------------------------------------------------------------- 7. each interface its own words
def test_errors_speak_the_interface_they_came_from(tmp_path, capsys, pool, pool_file):
    db = str(tmp_path / "s.db")
    _new(capsys, db, pool_file)
    with pytest.raises(SessionError) as info:
        Session.create(db, pool, "f1", "passive")
    assert "Session.open" in str(info.value)
    rc, out, err = _cli(capsys, "session", "new", db, "--pool", pool_file)
    assert rc == 2 and "already exists" in err and "Session.open" not in err and "bayes-eval session" in err
    # the recorded pool is gone: the API says pass the pool, the CLI says --pool FILE
    moved = tmp_path / "moved.csv"
    os.replace(pool_file, moved)
    try:
        with pytest.raises(SessionError) as info:
            Session.open(db)
        assert "Session.open(path, pool)" in str(info.value) and "--pool" not in str(info.value)
        rc, out, err = _cli(capsys, "session", "status", db)
        assert rc == 2 and "--pool FILE" in err and "Session.open" not in err and "explicitly" not in err
        rc, out, err = _cli(capsys, "session", "status", db, "--pool", moved)
        assert rc == 0, err
    finally:
        os.replace(moved, pool_file)
    # a pool without predictions: the CLI names --threshold, the API threshold=
    nopred = tmp_path / "nopred.csv"
    pd.read_csv(pool_file).drop(columns="pred").assign(score=lambda d: 1 / (1 + np.exp(-d["score"]))).to_csv(
        nopred, index=False)
    rc, out, err = _cli(capsys, "session", "new", tmp_path / "n.db", "--pool", nopred)
    assert rc == 2 and "--threshold 0.5" in err and "threshold=" not in err
    rc, out, err = _cli(capsys, "session", "new", tmp_path / "n.db", "--pool", pool_file, "--design", "is",
                        "--poisson-size", "exact")
    assert rc == 2 and "--poisson-size" in err and "fixed_size" not in err
    with pytest.raises(SessionError, match="fixed_size"):
        Session.create(str(tmp_path / "n.db"), pool, "f1", "is", fixed_size="pareto")


# ---------------------------------------------------------------------------- 8. labels as single values
def test_add_labels_refuses_single_values(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "passive", seed=0, n_strata=8)
    b = s.next_batch(3)
    before = s._store.dump()
    with pytest.raises(MalformedInputError, match="items must be a sequence.*single value 5"):
        s.add_labels(np.array(5), np.array(1))
    with pytest.raises(MalformedInputError, match="labels must be a sequence.*single value 1"):
        s.add_labels(b["item"].to_numpy()[:1], np.int64(1))
    with pytest.raises(MalformedInputError, match="one-dimensional"):
        s.add_labels(np.zeros((2, 2)), np.zeros(2))
    with pytest.raises(MalformedInputError, match="single value None"):
        s.add_labels(None, None)
    assert s._store.dump() == before


# ---------------------------------------------------------------------------- score kinds and thresholds through the CLI
def test_session_new_reads_the_pool_as_told_and_reopens_it_the_same_way(tmp_path, capsys, pool_file):
    probs = tmp_path / "probs.csv"
    d = pd.read_csv(pool_file)
    d.drop(columns="pred").assign(score=1 / (1 + np.exp(-d["score"]))).to_csv(probs, index=False)
    db = str(tmp_path / "p.db")
    rc, out, err = _cli(capsys, "session", "new", db, "--pool", probs, "--threshold", "0.5", "--design", "is",
                        "--strata", "8", "--format", "json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["pool"]["read"] == {"score_kind": "probability", "threshold": 0.5, "csv_ids": "text"}
    assert any("probabilit" in n for n in info["pool_notes"]) and any("0.5" in n for n in info["pool_notes"])
    s = Session.open(db)  # reads the pool as it was read at creation (else: no 'pred', refused)
    assert s.pool.score_kind == "probability" and s.pool.threshold == 0.5
    assert np.array_equal(s.pool.preds[:, 0], d["pred"].to_numpy())
    s.close()
    rc, out, err = _cli(capsys, "session", "new", tmp_path / "m.db", "--pool", pool_file, "--score-kind", "margin",
                        "--design", "is", "--strata", "8")
    assert rc == 0 and "created session" in out and "margin" in out.splitlines()[0], err


def test_a_session_without_recorded_reading_reopens_its_pool_the_legacy_way(tmp_path, pool_file, monkeypatch):
    import bayes_eval.registry as registry

    pool = registry.load_pool(pool_file)
    db = str(tmp_path / "s.db")
    Session.create(db, pool, "f1", "passive", n_strata=8, pool_path=pool_file).close()
    with sqlite3.connect(db) as c:  # as a file written before score kinds: no config["pool"]["read"]
        cfg = json.loads(c.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
        assert cfg["pool"].pop("read") == {"score_kind": "margin", "threshold": None, "csv_ids": "text"}
        c.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(cfg),))
    calls = []
    real = registry.load_pool
    monkeypatch.setattr(registry, "load_pool", lambda *a, **k: calls.append(k) or real(*a, **k))
    Session.open(db).close()
    assert calls == [{"legacy": True, "csv_ids": "guess"}]


def test_zero_padded_csv_ids_stay_text_and_older_sessions_reopen_as_read(tmp_path):
    """A CSV's ids ``00017`` are kept as written (pandas read them as the integer 17, so
    ``001`` and ``1`` were one id); a session created before, whose reading recorded no
    ``csv_ids``, reopens its pool as it was read then, with its labels."""
    import bayes_eval.registry as registry

    s_, pred, y = np.linspace(-2, 2, 60), (np.linspace(-2, 2, 60) > 0).astype(int), np.arange(60) % 2
    f = tmp_path / "zp.csv"
    pd.DataFrame({"item": [f"{i:05d}" for i in range(60)], "score": s_, "pred": pred}).to_csv(f, index=False)
    pool = registry.load_pool(str(f))
    assert list(pool.ids[:3]) == ["00000", "00001", "00002"]
    with pytest.raises(PoolError, match="unknown item id"):
        pool.index_of([17])
    g = tmp_path / "mixed.csv"
    pd.DataFrame({"item": ["001", "01", "1"], "score": [0.1, 0.2, 0.3], "pred": [0, 0, 1]}).to_csv(g, index=False)
    assert list(registry.load_pool(str(g)).ids) == ["001", "01", "1"]      # three ids, not one duplicated
    h = tmp_path / "ints.csv"
    pd.DataFrame({"item": [10**17 + 3, -4, 0], "score": [0.1, 0.2, 0.3], "pred": [0, 0, 1]}).to_csv(h, index=False)
    ints = registry.load_pool(str(h)).ids
    assert ints.dtype.kind == "i" and list(ints) == [10**17 + 3, -4, 0]     # integers stay the integers they are
    # a session of the earlier reading: ids 0..59 as integers, its reading without csv_ids
    old = registry.load_pool(str(f), csv_ids="guess")
    assert old.ids.dtype.kind == "i"
    db = str(tmp_path / "old.db")
    s = Session.create(db, old, "f1", "passive", n_strata=4, pool_path=str(f))
    batch = s.next_batch(6)
    s.add_labels(batch["item"], y[batch["item"].to_numpy()])
    s.close()
    with sqlite3.connect(db) as c:
        cfg = json.loads(c.execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
        del cfg["pool"]["read"]["csv_ids"]
        c.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(cfg),))
    s = Session.open(db)
    assert s.n_labels == 6 and s.pool.ids.dtype.kind == "i"
    s.close()


def test_simulate_prints_the_pools_notes(tmp_path, capsys, pool_file):
    rc, out, err = _cli(capsys, "simulate", pool_file, "--design", "passive", "--budget", "40", "--batch", "20",
                        "--repeats", "2", "--checkpoints", "40", "--strata", "4", "--bayes", "no",
                        "--score-kind", "margin")
    assert rc == 0, err
    assert "margin" in err and "true f1" in out


def test_a_pool_without_scores_says_how_many_strata_hold_items(tmp_path, capsys, pool, pool_file):
    """Without a score column the strata come from the predictions alone: the summary says
    how many of the requested strata hold items, and the pool's note comes once, in words."""
    f = tmp_path / "noscore.csv"
    pd.DataFrame({"item": np.arange(pool.n_items), "pred": pool.preds[:, 0],
                  "label": pool.labels}).to_csv(f, index=False)
    rc, out, err = _cli(capsys, "session", "new", tmp_path / "a.db", "--pool", f, "--design", "ais")
    assert rc == 0, err
    assert "(256 strata, 2 non-empty," in out and out.count("no score column") == 1 and "PoolWarning" not in out + err
    rc, out, err = _cli(capsys, "session", "new", tmp_path / "b.db", "--pool", f, "--design", "ais", "--format", "json")
    d = json.loads(out)
    assert rc == 0 and (d["strata"], d["strata_nonempty"]) == (256, 2)
    # with scores: the strata the score's CSF rule leaves empty are counted the same way
    d = json.loads(_new(capsys, tmp_path / "c.db", pool_file, "--format", "json"))
    st = Session.open(str(tmp_path / "c.db"))
    assert d["strata_nonempty"] == np.unique(np.asarray(st._core.strata.index)).size <= d["strata"] == 8
    st.close()

def test_a_session_whose_pool_cannot_be_read_names_it(tmp_path, capsys, pool):
    """The recorded pool now unreadable (a duplicate id written into it): the message names
    the file and the problem; --pool is offered only as the way to a pool that moved."""
    f = tmp_path / "p.csv"
    frame = pd.DataFrame({"item": np.arange(pool.n_items), "score": pool.scores[:, 0], "pred": pool.preds[:, 0],
                          "label": pool.labels})
    frame.to_csv(f, index=False)
    _new(capsys, tmp_path / "s.db", f)
    frame.loc[5, "item"] = 4
    frame.to_csv(f, index=False)
    rc, out, err = _cli(capsys, "session", "status", tmp_path / "s.db")
    assert rc == 2 and f"cannot load the session's pool {f}: " in err and "duplicate" in err, err
    assert "(if it is elsewhere now, give it with --pool FILE)" in err


def test_simulate_reports_at_the_budget_when_every_checkpoint_is_past_it(tmp_path, capsys, pool_file):
    """`simulate --budget 40` with the default checkpoints (500, 1000, 2000) used to fail with a
    KeyError (no checkpoint within the budget): the run's end is now its checkpoint."""
    rc, out, err = _cli(capsys, "simulate", pool_file, "--design", "passive", "--budget", "40", "--batch", "20",
                        "--repeats", "2", "--strata", "4", "--bayes", "no", "--format", "json")
    assert rc == 0, err
    assert [c["labels"] for c in json.loads(out)["checkpoints"]] == [40]


def test_simulate_says_when_runs_stalled_and_how_many_labels_were_spent(tmp_path, capsys):
    """A 60-item pool and a budget of 100: every run stalls at 60 labels.  The checkpoint
    (the budget, 100) must not pass for the labels spent: the JSON's ``mean_labels`` is 60
    and the text says the runs stalled."""
    from bayes_eval.pool import demo_pool

    small = demo_pool(n_items=60, positive_rate=0.2, seed=1)
    f = tmp_path / "small.csv"
    pd.DataFrame({"item": np.arange(60), "score": small.scores[:, 0], "pred": small.preds[:, 0],
                  "label": small.labels}).to_csv(f, index=False)
    args = ("simulate", f, "--design", "passive", "--budget", "100", "--batch", "50", "--repeats", "3",
            "--checkpoints", "100", "--strata", "8", "--bayes", "no", "--score-kind", "margin")
    rc, out, err = _cli(capsys, *args, "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["stalled_runs"] == 3
    assert [(c["labels"], c["mean_labels"]) for c in d["checkpoints"]] == [(100, 60.0)]
    rc, out, err = _cli(capsys, *args)
    assert rc == 0, err
    assert "3 of 3 runs stalled" in out and "100: 60" in out
    assert "the pool has only 60 items" in out and "almost no mass" not in out   # the cause named
    # a checkpoint within the pool is reached: the stall is after it, not "fewer than the checkpoints say"
    rest = args[:10] + args[12:]                                  # args without "--checkpoints 100"
    rc, out, err = _cli(capsys, *rest, "--checkpoints", "50,100")
    assert rc == 0, err
    line = next(x for x in out.splitlines() if "runs stalled" in x)
    assert line.endswith("labels spent on average at 100: 60")         # only the checkpoint not reached
    rc, out, err = _cli(capsys, *rest, "--checkpoints", "50")
    assert rc == 0, err
    assert "after the last checkpoint (50), which every run reached; the budget of 100 was not spent" in out
    assert "fewer labels were spent" not in out


def test_simulate_is_silent_about_stalls_when_no_run_stalled(tmp_path, capsys, pool_file):
    rc, out, err = _cli(capsys, "simulate", pool_file, "--design", "passive", "--budget", "40", "--batch", "20",
                        "--repeats", "2", "--checkpoints", "40", "--strata", "4", "--bayes", "no",
                        "--score-kind", "margin")
    assert rc == 0, err
    assert "stalled" not in out
