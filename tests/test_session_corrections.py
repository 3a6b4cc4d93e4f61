"""Labels corrected after they were accepted (bayes_eval/session_corrections.py): the
estimate reads the corrected label from every draw, the draws' proposals stay what drew
them, a reopened session (with or without its stored stage states) is the session that
made the corrections, bad corrections change nothing, and the command line does it."""
import json
import re
import shlex
import sqlite3

import numpy as np
import pandas as pd
import pytest

from bayes_eval import measures as M
from bayes_eval import session_replay
from bayes_eval.cli import main as cli_main
from bayes_eval.pool import demo_pool
from bayes_eval.session import (EmptyInputError, InvalidLabelError, LabelConflictError, MalformedInputError,
                                NotDrawnError, Session, UnknownItemError)


@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=2000, positive_rate=0.1, seed=11)


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


def _truth(pool, items):
    return pool.labels[pool.index_of(np.asarray(items))]


def _state(s):
    """Everything a session is: per-stage tallies, estimates and their (model-assisted) covariances,
    and the next batch it would draw."""
    snaps = s.snapshots()
    tallies = [(x.labeled, x.draw_counts, x.wsum, x.w2sum) for x in snaps]
    est = [np.concatenate([np.ravel(s._values(i)[0]), np.ravel(s._values(i)[1])]) for i in range(len(snaps))]
    nxt = s._kind.draw(s.n_stages, 20, s._labeled, s._lab, s._skipped).rows
    return tallies, est, nxt


def _assert_same(a, b, exact=True):
    (ta, ea, na), (tb, eb, nb) = a, b
    assert len(ta) == len(tb) and len(ea) == len(eb)
    for x, y in zip(ta, tb):
        for u, v in zip(x, y):
            np.testing.assert_allclose(u, v, rtol=0 if exact else 1e-12, atol=0)
    for u, v in zip(ea, eb):
        np.testing.assert_allclose(u, v, rtol=0 if exact else 1e-12, atol=0)
    np.testing.assert_array_equal(na, nb)


def _session_with_wrong_labels(path, pool, design, stages=4, wrong_stages=(0, 1), truth=None):
    """Label ``stages`` batches of 20 with the truth (``truth``'s labels, default ``pool``'s),
    except that the first two positives of each batch in ``wrong_stages`` are labeled 0;
    returns the session and those items."""
    s = Session.create(str(path), pool, "f1", design, seed=3)
    wrong = []
    for st in range(stages):
        b = s.next_batch(20)
        y = _truth(truth if truth is not None else pool, b["item"]).copy()
        if st in wrong_stages:
            k = np.flatnonzero(y == 1)[:2]
            y[k] = 0
            wrong += b["item"].to_numpy()[k].tolist()
        s.add_labels(b["item"], y)
    assert wrong, "the batches held no positive to mislabel"
    return s, wrong


@pytest.mark.parametrize("design", ["ais", "poisson-adaptive"])
def test_a_correction_before_the_batch_closes_is_the_right_label_from_the_start(tmp_path, pool, design):
    """A label corrected while its batch is still open never reached a closed stage: the
    session is then bit for bit the session that was given the right label."""
    right = Session.create(str(tmp_path / "right.db"), pool, "f1", design, seed=3)
    fixed = Session.create(str(tmp_path / "fixed.db"), pool, "f1", design, seed=3)
    for st in range(3):
        b = right.next_batch(20)
        right.add_labels(b["item"], _truth(pool, b["item"]))
        b2 = fixed.next_batch(20)
        assert b2["item"].tolist() == b["item"].tolist()
        items, y = b2["item"].to_numpy(), _truth(pool, b2["item"]).copy()
        if st == 1:   # half the batch in, one of them wrong, corrected, then the rest
            y_wrong = y.copy()
            y_wrong[0] = 1 - y_wrong[0]
            fixed.add_labels(items[:10], y_wrong[:10])
            r = fixed.correct(items[0], int(y[0]), reason="review")
            assert (r.n_changed, r.n_same, r.corrections) == (1, 0, 1)
            assert fixed.n_pending == 10
            fixed.add_labels(items[10:], y[10:])
        else:
            fixed.add_labels(items, y)
    _assert_same(_state(right), _state(fixed))
    right.close()
    fixed.close()
    with Session.open(str(tmp_path / "fixed.db"), pool) as s, Session.open(str(tmp_path / "right.db"), pool) as r:
        _assert_same(_state(r), _state(s))
        assert s.corrections()["stage_open"].tolist() == [True]


def test_a_late_correction_is_read_from_every_draw(tmp_path, pool):
    """Labels corrected two stages after they were given: the importance-sampling estimate is
    the one the stored draws' weights give with the corrected labels (001 eq. 1) -- the
    proposals that drew them stay -- and the label that arrived is kept in the file."""
    s, wrong = _session_with_wrong_labels(tmp_path / "s.db", pool, "ais")
    before = float(s.estimate_draws(M.f1()).value[0])
    draws_before = s.draws()
    r = s.correct(wrong, [1] * len(wrong), reason="adjudicated")
    assert r.n_changed == len(wrong) and r.labels == 80
    lab = s.labels()
    np.testing.assert_array_equal(lab["label"], _truth(pool, lab["item"]))   # every label in force is right now
    assert set(lab.loc[lab["corrected"], "item"]) == set(wrong)
    assert s._store.meta()["schema_version"] == 2    # a bayes_eval from before corrections refuses the file
    assert [row[3] for row in s._store.labels() if row[2] in set(wrong)] == [0] * len(wrong)  # as it arrived
    d = s.draws()
    pd.testing.assert_frame_equal(d, draws_before)   # the draws, their q and weights: unchanged
    y = d["row"].map(dict(zip(lab["row"], lab["label"]))).to_numpy()
    yhat, w = pool.preds[d["row"].to_numpy(), 0], d["weight"].to_numpy()
    after = float(s.estimate_draws(M.f1()).value[0])
    assert after == pytest.approx(2 * np.sum(w * y * yhat) / np.sum(w * (y + yhat)), rel=1e-12)
    assert after > before   # positives the classifier found, restored
    # every closed stage's tallies hold the labels in force: labeled counts per class are the truth's
    rows = np.asarray(sorted(s._label_of))
    assert s.snapshots()[-1].labeled[:, 1].sum() == pool.labels[rows].sum()
    s.close()


@pytest.mark.parametrize("design", ["ais", "poisson-adaptive", "stratified"])
def test_a_reopened_session_replays_its_corrections_where_they_were_made(tmp_path, pool, monkeypatch, design):
    """Corrections made between stages, then more stages: reopening (from the stored stage
    states, and with every stage recomputed from the labels known at its time) gives the
    live session's tallies, estimates and next batch -- also for Poisson rounds, whose
    replay checks every round's inclusion probabilities against the labels then."""
    path = tmp_path / "s.db"
    s, wrong = _session_with_wrong_labels(path, pool, design, stages=3)
    s.correct(wrong[:1], [1], reason="first review")
    b = s.next_batch(20)
    s.add_labels(b["item"], _truth(pool, b["item"]))
    s.correct(wrong[1:], [1] * (len(wrong) - 1))
    b = s.next_batch(20)
    s.add_labels(b["item"], _truth(pool, b["item"]))
    live = _state(s)
    s.close()
    with Session.open(str(path), pool) as s2:
        _assert_same(live, _state(s2))
        assert s2.corrections()["reason"].tolist()[0] == "first review"
    with monkeypatch.context() as m:   # every design state recomputed
        m.setattr(session_replay.SessionReplay, "_stored_closings", lambda self: {})
        with Session.open(str(path), pool) as s3:
            _assert_same(live, _state(s3), exact=False)


def test_bad_corrections_change_nothing(tmp_path, pool):
    s, wrong = _session_with_wrong_labels(tmp_path / "s.db", pool, "is", stages=2)
    b = s.next_batch(10)
    pending = b["item"].iloc[0]
    s.add_labels(b["item"].iloc[2:], _truth(pool, b["item"].iloc[2:]))
    s.skip(b["item"].iloc[1])
    labeled = set(s._label_of)
    never = next(int(v) for v in pool.ids if int(pool.index_of(np.asarray([v]))[0]) not in labeled
                 and v != pending and v != b["item"].iloc[1])
    dump, est = s._store.dump(), s.estimate().to_numpy()
    cases = [
        (lambda: s.correct([10**9], [1]), UnknownItemError, "10000000"),
        (lambda: s.correct([pending], [1]), NotDrawnError, "awaits its first label"),
        (lambda: s.correct([b["item"].iloc[1]], [1]), NotDrawnError, "skipped"),
        (lambda: s.correct([never], [1]), NotDrawnError, "not been labeled"),
        (lambda: s.correct([wrong[0]], [5]), InvalidLabelError, "5"),
        (lambda: s.correct([wrong[0], wrong[0]], [1, 0]), LabelConflictError, "two different labels"),
        (lambda: s.correct([], []), EmptyInputError, "no labels"),
        (lambda: s.correct([wrong[0]], [1, 0]), MalformedInputError, "1 items but 2 labels"),
    ]
    for call, exc, text in cases:
        with pytest.raises(exc, match=text):
            call()
        assert s._store.dump() == dump
        np.testing.assert_array_equal(s.estimate().to_numpy(), est)
    r = s.correct([wrong[0]], [0])   # the label it already has: harmless, nothing recorded
    assert (r.n_changed, r.n_same, r.corrections) == (0, 1, 0) and s._store.dump() == dump
    s.close()


def _cli(capsys, *argv):
    rc = cli_main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_correct(tmp_path, capsys, pool):
    pool_file = tmp_path / "pool.csv"
    # ids with a space and a session path with one: the commands the messages suggest are quoted for a shell
    pd.DataFrame({"item": [f"p {i}" for i in range(pool.n_items)], "score": pool.scores[:, 0],
                  "pred": pool.preds[:, 0]}).to_csv(pool_file, index=False)
    truth = pd.Series(pool.labels, index=[f"p {i}" for i in range(pool.n_items)])
    db = str(tmp_path / "my session.db")
    rc, out, err = _cli(capsys, "session", "new", db, "--pool", str(pool_file), "--measure", "f1", "--design", "is",
                        "--seed", "0", "--label-map", "no=0,yes=1")
    assert rc == 0, err
    wrong = []
    for k in range(2):
        batch = tmp_path / f"b{k}.csv"
        assert _cli(capsys, "session", "next", db, "--n", "30", "--out", str(batch))[0] == 0
        b = pd.read_csv(batch)
        y = truth.loc[b["item"]].to_numpy().copy()
        pos = np.flatnonzero(y == 1)[:1]
        y[pos] = 0
        wrong += b["item"].to_numpy()[pos].tolist()
        b["label"] = np.where(y == 1, "yes", "no")
        b.to_csv(batch, index=False)
        rc, out, err = _cli(capsys, "session", "ingest", db, str(batch))
        assert rc == 0, err
    assert len(wrong) == 2
    rc, out, err = _cli(capsys, "session", "status", db, "--format", "json", "--no-bayesian")
    f1_before = json.loads(out)["estimates"][0]["estimate"]
    # the fixed annotation, re-ingested, is refused and names the command that corrects it
    again = tmp_path / "again.csv"
    pd.DataFrame({"item": wrong[:1], "label": ["yes"]}).to_csv(again, index=False)
    rc, out, err = _cli(capsys, "session", "ingest", db, str(again))
    assert rc == 2 and f"bayes-eval session correct {shlex.quote(db)} {shlex.quote(wrong[0])} yes" in err
    suggested = re.search(r"bayes-eval (session correct .*?) \(a reviewed", err).group(1)
    assert shlex.split(suggested) == ["session", "correct", db, wrong[0], "yes"]    # pasted into a shell: these words
    rc, out, err = _cli(capsys, *shlex.split(suggested), "--reason", "review")
    assert rc == 0 and "corrected 1 label(s); 1 correction(s) in the session" in out, err
    fix = tmp_path / "fix.csv"
    pd.DataFrame({"item": wrong, "label": ["yes", "yes"]}).to_csv(fix, index=False)
    rc, out, err = _cli(capsys, "session", "correct", db, "--file", str(fix), "--format", "json")
    assert rc == 0, err
    assert json.loads(out) == {"n_items": 2, "n_changed": 1, "n_same": 1, "corrections": 2, "labels": 60}
    bad = tmp_path / "bad.csv"   # a file row that cannot be corrected names its file and line once
    pd.DataFrame({"item": ["nope"], "label": ["yes"]}).to_csv(bad, index=False)
    rc, out, err = _cli(capsys, "session", "correct", db, "--file", str(bad))
    assert rc == 2 and f"{bad}: line 2" in err and f"{bad}: {bad}" not in err, err
    rc, out, err = _cli(capsys, "session", "correct", db, wrong[0])
    assert rc == 2 and "pairs" in err
    rc, out, err = _cli(capsys, "session", "correct", db, "nope", "yes")
    assert rc == 2 and "nope" in err
    rc, out, err = _cli(capsys, "session", "status", db, "--format", "json", "--no-bayesian")
    st = json.loads(out)
    assert st["estimates"][0]["estimate"] > f1_before and st["corrections"] == 2
    rc, out, err = _cli(capsys, "session", "status", db, "--no-bayesian")
    assert "corrected: 2 label(s) changed after they arrived" in out
    rep = tmp_path / "rep"
    rc, out, err = _cli(capsys, "session", "report", db, "--out", str(rep), "--no-bayesian")
    assert rc == 0, err
    assert "## Corrected labels" in (rep / "report.md").read_text()
    fixes = pd.read_csv(rep / "corrections.csv")
    assert fixes["item"].tolist() == wrong and fixes["old_label"].tolist() == [0, 0]
    assert fixes["reason"].fillna("").tolist() == ["review", ""]
    labels, draws = pd.read_csv(rep / "labels.csv"), pd.read_csv(rep / "draws.csv")
    assert sorted(labels.loc[labels["corrected"], "item"]) == sorted(wrong)
    np.testing.assert_array_equal(labels["label"], truth.loc[labels["item"]].to_numpy())
    np.testing.assert_array_equal(draws["label"], truth.loc[draws["item"]].to_numpy())
    con = sqlite3.connect(db)   # what arrived is still there
    assert con.execute("SELECT COUNT(*) FROM labels WHERE label=0 AND item IN (?, ?)", wrong).fetchone()[0] == 2
    con.close()


def test_ingest_with_correct_turns_changed_annotations_into_corrections(tmp_path, capsys, pool):
    """A reviewed export -- some labels changed since they were ingested, the open batch's new
    ones beside them -- ingested with --correct: the changed ones are corrections, the new ones
    labels.  A file refused for any row changes nothing, its corrections included."""
    from bayes_eval.pool import Pool

    pool_file = tmp_path / "pool.parquet"
    pd.DataFrame({"item": np.asarray(pool.ids), "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}
                 ).to_parquet(pool_file)
    db = str(tmp_path / "s.db")
    s, wrong = _session_with_wrong_labels(db, Pool.from_file(str(pool_file), item="item", score="score", pred="pred"),
                                          "is", stages=2, truth=pool)
    b = s.next_batch(10)
    s.close()
    items = list(wrong) + b["item"].tolist()
    export = pd.DataFrame({"item": items, "label": _truth(pool, items)})
    bad = tmp_path / "bad.csv"
    pd.concat([export, pd.DataFrame({"item": [10**9], "label": [1]})]).to_csv(bad, index=False)
    pf = ("--pool", str(pool_file))
    before = Session.open(db, str(pool_file))._store.dump()
    rc, out, err = _cli(capsys, "session", "ingest", db, str(bad), "--correct", *pf)
    assert rc == 2 and "1000000000" in err
    assert Session.open(db, str(pool_file))._store.dump() == before    # its corrections were not written either
    drawn = set(Session.open(db, str(pool_file)).draws()["item"])
    never = next(int(v) for v in np.asarray(pool.ids) if int(v) not in drawn)
    pd.concat([export, pd.DataFrame({"item": [never], "label": [1]})]).to_csv(bad, index=False)
    rc, out, err = _cli(capsys, "session", "ingest", db, str(bad), "--correct", *pf)   # caught by the ingest's checks
    assert rc == 2 and f"{never}" in err and "never" in err, err
    assert Session.open(db, str(pool_file))._store.dump() == before
    good = tmp_path / "reviewed.csv"
    export.to_csv(good, index=False)
    rc, out, err = _cli(capsys, "session", "ingest", db, str(good), *pf)    # without --correct: refused
    assert rc == 2 and "already has label 0" in err
    rc, out, err = _cli(capsys, "session", "ingest", db, str(good), "--correct", "--format", "json", *pf)
    assert rc == 0, err
    r = json.loads(out)["files"][0]
    assert (r["n_new"], r["n_corrected"], r["stage_closed"]) == (10, len(wrong), True)
    with Session.open(db, str(pool_file)) as s2:
        lab = s2.labels()
        np.testing.assert_array_equal(lab["label"], _truth(pool, lab["item"]))
        fixes = s2.corrections()
        assert sorted(fixes["item"]) == sorted(wrong) and fixes["reason"].str.startswith("ingest ").all()
    rc, out, err = _cli(capsys, "session", "ingest", db, str(good), "--correct", *pf)   # again: nothing to do
    assert rc == 0 and "already ingested" in out


def test_the_retally_is_what_closing_the_stages_with_the_right_labels_gives(tmp_path, pool):
    """Two routes to the same tallies: a session whose labels were corrected after their stages
    closed (``_retallied``), and its file rewritten as if the right labels had arrived, reopened
    on its stored stage states (each stage closed again by ``Session._close_state``, the
    proposals as stored).  Tallies, the expected Σw² of the CLT check and so the model-assisted
    covariance, and the next batch agree.  (AIS: a stored Poisson round also holds its labels,
    so rewriting the labels alone would not make that file one of right labels; the rounds'
    records are checked against the draws in the next test.)"""
    path = tmp_path / "s.db"
    s, wrong = _session_with_wrong_labels(path, pool, "ais", stages=4)
    s.correct(wrong, [1] * len(wrong))
    live = _state(s)
    ew2 = [(x.ew2_lab, x.ew2_unl) for x in s.snapshots()]
    s.close()
    con = sqlite3.connect(path)
    con.executemany("UPDATE labels SET label=1 WHERE item=?", [(int(v),) for v in wrong])
    con.execute("DROP TABLE corrections")
    con.commit()
    con.close()
    with Session.open(str(path), pool) as s2:
        assert len(s2.corrections()) == 0
        _assert_same(live, _state(s2), exact=False)
        for (a, b), x in zip(ew2, s2.snapshots()):
            np.testing.assert_allclose(a, x.ew2_lab, rtol=1e-12)
            np.testing.assert_allclose(b, x.ew2_unl, rtol=1e-12)


def test_the_poisson_rounds_records_hold_the_corrected_labels(tmp_path, pool):
    """After a late correction every round's record counts, per (cell, class), the labels in
    force of the items it brought (``sampled``) and of those labeled before it
    (``labeled_before``), as the stored draws say -- the Horvitz-Thompson estimate reads them."""
    s, wrong = _session_with_wrong_labels(tmp_path / "s.db", pool, "poisson-adaptive", stages=4)
    s.correct(wrong, [1] * len(wrong))
    d, lab = s.draws(), s.labels()
    y = d["row"].map(dict(zip(lab["row"], lab["label"]))).to_numpy()
    x, c = s._labeled.shape
    before = np.zeros((x, c))
    for k, rec in enumerate(s._kind.rounds):
        m = (d["stage"] == s.snapshots()[k].stage).to_numpy()
        got = np.bincount(s.item_cell[d["row"].to_numpy()[m]] * c + y[m], minlength=x * c).reshape(x, c)
        np.testing.assert_array_equal(rec["sampled"], got)
        np.testing.assert_array_equal(rec["labeled_before"], before)
        before = before + got
    assert before[:, 1].sum() == pool.labels[pool.index_of(lab["item"].to_numpy())].sum()
    s.close()


def test_a_stochastic_oracles_draw_is_corrected(tmp_path, pool, monkeypatch):
    """A stochastic oracle labels draws: a correction names the draw whose recorded label was
    wrong; the item's other draws keep theirs, the estimate reads each draw's label in force,
    and a reopened session (stored states, or every stage recomputed) is the live one."""
    path = tmp_path / "st.db"
    s = Session.create(str(path), pool, "f1", "ais", seed=3, oracle="stochastic")
    for _ in range(4):
        b = s.next_batch(25)
        s.add_labels(b["item"], _truth(pool, b["item"]), draws=b["draw"])
    d = s.draws()
    lab = s.labels()
    rep = d["row"].value_counts()
    multi = int(rep.index[0])   # the item drawn most often
    assert rep.iloc[0] >= 2, "no item was drawn twice"
    item = lab.loc[lab["row"] == multi, "item"].iloc[0]
    its = sorted(lab.loc[lab["row"] == multi, "draw"].astype(int))
    y0 = int(pool.labels[multi])
    with pytest.raises(NotDrawnError, match=f"{len(its)} labeled draws"):
        s.correct([item], [1 - y0])   # which of its draws?
    with pytest.raises(NotDrawnError, match="no labeled draw 999999"):
        s.correct([item], [1 - y0], draws=[999999])
    r = s.correct([item], [1 - y0], draws=[its[0]], reason="typo")   # a data-entry error on one draw
    assert (r.n_changed, r.corrections) == (1, 1)
    lab = s.labels()
    by_draw = dict(zip(lab["draw"].astype(int), lab["label"]))
    assert by_draw[its[0]] == 1 - y0 and all(by_draw[k] == y0 for k in its[1:])
    assert s.corrections()["draw"].tolist() == [its[0]]
    yv = d["draw"].map(by_draw).to_numpy()
    yhat, w = pool.preds[d["row"].to_numpy(), 0], d["weight"].to_numpy()
    by_hand = 2 * np.sum(w * yv * yhat) / np.sum(w * (yv + yhat))
    assert float(s.estimate_draws(M.f1()).value[0]) == pytest.approx(by_hand, rel=1e-12)
    # the session's own estimate, from its per-(cell, class) tallies (nothing projected under this oracle)
    assert float(np.ravel(s.estimate().to_numpy())[0]) == pytest.approx(by_hand, rel=1e-12)
    b = s.next_batch(25)
    s.add_labels(b["item"], _truth(pool, b["item"]), draws=b["draw"])
    live = _state(s)
    s.close()
    with Session.open(str(path), pool) as s2:
        _assert_same(live, _state(s2))
    with monkeypatch.context() as m:
        m.setattr(session_replay.SessionReplay, "_stored_closings", lambda self: {})
        with Session.open(str(path), pool) as s3:
            _assert_same(live, _state(s3), exact=False)


def test_a_stochastic_oracles_reviewed_file_corrects_the_draws_it_names(tmp_path, pool):
    """``ingest --correct`` under a stochastic oracle (stop 75; refused before): a reviewed file's
    row that names a labeled draw with another label corrects that draw (the item's other draws
    keep theirs); rows of the open batch are ingested beside it.  Without --correct the file is
    refused and the message names the route; a file refused by the ingest's checks writes no
    correction either."""
    path = str(tmp_path / "st.db")
    s = Session.create(path, pool, "f1", "passive", seed=3, oracle="stochastic")
    for _ in range(2):
        b = s.next_batch(25)
        s.add_labels(b["item"], _truth(pool, b["item"]), draws=b["draw"])
    lab = s.labels()
    done = lab.iloc[3]
    fixed_draw, item, y0 = int(done["draw"]), done["item"], int(done["label"])
    b = s.next_batch(10)
    before = s._store.dump()
    reviewed = pd.concat([
        pd.DataFrame({"item": lab["item"], "draw": lab["draw"].astype(int), "label": lab["label"]}),
        pd.DataFrame({"item": b["item"], "draw": b["draw"].astype(int), "label": _truth(pool, b["item"])})])
    reviewed.loc[reviewed["draw"] == fixed_draw, "label"] = 1 - y0
    bad = tmp_path / "bad.csv"
    pd.concat([reviewed, pd.DataFrame({"item": [b["item"].iloc[0]], "draw": [999999], "label": [1]})]).to_csv(
        bad, index=False)
    with pytest.raises(NotDrawnError, match="no draw 999999"):
        s.ingest_file(str(bad), correct=True)
    assert s._store.dump() == before                      # the correction was not written either
    good = tmp_path / "reviewed.csv"
    reviewed.to_csv(good, index=False)
    with pytest.raises(LabelConflictError, match="--correct"):
        s.ingest_file(str(good))
    assert s._store.dump() == before
    r = s.ingest_file(str(good), correct=True)
    assert (r.n_new, r.n_corrected, r.stage_closed) == (10, 1, True)
    fixes = s.corrections()
    assert fixes["draw"].tolist() == [fixed_draw] and fixes["item"].tolist() == [item]
    by_draw = dict(zip(s.labels()["draw"].astype(int), s.labels()["label"]))
    assert by_draw[fixed_draw] == 1 - y0
    assert all(by_draw[int(d)] == int(y) for d, y in zip(reviewed["draw"], reviewed["label"]))
    s.close()


def test_a_reviewers_ground_truth_annotation_corrects_with_resolve_ground_truth(tmp_path, pool):
    """Label Studio review: the annotator's label was ingested, then a reviewer adds an annotation
    marked ground truth.  A plain re-ingest keeps the label already held (the disagreement counts
    as resolved); ``--correct --resolve ground-truth`` lets the rule decide first, so the
    reviewer's label corrects it; a task the rule cannot decide keeps the held label."""
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "is", seed=3)
    b = s.next_batch(6)
    items = b["item"].tolist()
    y = _truth(pool, items)
    first = [1 - int(y[0])] + [int(v) for v in y[1:]]   # task 0 mislabeled by the annotator
    s.add_labels(items, first)

    def ann(aid, choice, gt=False):
        return {"id": aid, "completed_by": {"email": "rev@x.org" if gt else "ann@x.org"}, "was_cancelled": False,
                "ground_truth": gt, "created_at": "2026-01-01T00:00:00Z",
                "result": [{"from_name": "label", "to_name": "item", "type": "choices",
                            "value": {"choices": [str(choice)]}}]}
    tasks = [{"id": 100 + k, "data": {"item": it},
              "annotations": [ann(500 + k, first[k])] + ([ann(600, int(y[0]), gt=True)] if k == 0 else [])
              + ([ann(700, 1 - int(y[1]))] if k == 1 else [])}   # task 1: a second opinion, no ground truth
             for k, it in enumerate(items)]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(tasks))
    r = s.ingest_file(str(export))                      # the held label stands
    assert r.n_corrected == 0 and s._label_of[int(pool.index_of(np.asarray([items[0]]))[0])] == first[0]
    r = s.ingest_file(str(export), resolve="ground-truth", correct=True)
    assert r.n_corrected == 1
    lab = s.labels()
    assert dict(zip(lab["item"], lab["label"])) == dict(zip(items, [int(v) for v in y]))
    assert s.corrections()["item"].tolist() == [items[0]]
    s.close()
