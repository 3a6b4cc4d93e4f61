"""Items nobody can label (issue 16): ``Session.skip`` / ``bayes-eval session skip``.

The claim (bayes_eval/session_skip.py): a session that skips estimates the measure on the
items that can be labeled, D — for ratio measures and for the others — and ``next`` goes on.
"""
import json

import numpy as np
import pytest

from bayes_eval.cli import main as cli_main
from bayes_eval.errors import LabelConflictError, NotDrawnError, SessionError, UnknownItemError
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=3000, positive_rate=0.15, seed=3)


def _unlabelable(pool):
    """U: half the true positives the classifier finds and a quarter of its true
    negatives — so the measures on D differ from those on the whole pool."""
    y, f, r = pool.labels, pool.preds[:, 0], np.arange(pool.n_items)
    return ((y == 1) & (f == 1) & (r % 2 == 0)) | ((y == 0) & (f == 0) & (r % 4 == 0))


def _truth(pool, mask):
    y, f = pool.labels[mask], pool.preds[mask, 0]
    tp, fp, fn = np.sum((y == 1) & (f == 1)), np.sum((y == 0) & (f == 1)), np.sum((y == 1) & (f == 0))
    return np.array([2 * tp / (2 * tp + fp + fn), np.mean(y == f)])


def _label_or_skip(s, pool, U, batch):
    rows = pool.index_of(batch["item"].to_numpy())
    if U[rows].any():
        s.skip(batch["item"][U[rows]], reason="unreadable")
    ok = ~U[rows]
    if ok.any():
        s.add_labels(batch["item"][ok], pool.labels[rows[ok]])


@pytest.mark.parametrize("design", ["is", "ais"])
def test_skipped_items_leave_an_estimate_of_the_measure_on_the_labelable_items(tmp_path, pool, design):
    """Over repeated sessions that skip every item of U, F1 and accuracy are estimated
    without bias for D (mean within 3 standard errors) — not for the whole pool — and the
    95% CLT interval of F1 covers F1 on D about as often as it says."""
    U = _unlabelable(pool)
    t_d, t_p = _truth(pool, ~U), _truth(pool, np.ones(pool.n_items, bool))
    assert np.all(np.abs(t_d - t_p) > [0.1, 0.02])
    reps = 40 if design == "is" else 10
    est, cover = [], 0
    for rep in range(reps):
        s = Session.create(str(tmp_path / f"{design}{rep}.db"), pool, ["f1", "accuracy"], design, seed=rep)
        for _ in range(4):
            _label_or_skip(s, pool, U, s.next_batch(50))
        assert s.n_pending == 0 and s.n_skipped > 0
        est.append(s.estimate().to_numpy())
        iv = s.intervals(bayesian=False).iloc[0]
        cover += iv["lower"] <= t_d[0] <= iv["upper"]
        s.close()
    est = np.asarray(est)
    mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(mean - t_d) < 3 * se + 0.005), (mean, t_d, se)
    far = np.abs(mean - t_p) > 3 * se  # the whole pool is not the target
    assert far[0] and (far[1] or design != "is"), (mean, t_p, se)
    if design == "is":
        assert cover / reps >= 0.8


def test_skip_closes_the_batch_next_goes_on_and_the_file_replays(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, ["f1", "accuracy"], "ais", seed=2)  # the core of the test above
    b = s.next_batch(10)
    r = s.skip(list(b["item"][:3]), reason="nobody can tell")
    assert (r.n_new, r.stage_closed, r.pending, r.skipped) == (3, False, 7, 3)
    assert s.skip([b["item"].iloc[0]]).n_already == 1  # again: harmless
    s.add_labels(b["item"][3:], pool.labels[pool.index_of(b["item"][3:].to_numpy())])
    assert s.n_pending == 0 and s.n_stages == 1
    before = s._store.dump()   # a label for a skipped item: refused as skipped (not "never drawn"), nothing changed
    with pytest.raises(NotDrawnError, match="was skipped as impossible to label"):
        s.add_labels([b["item"].iloc[0]], [1])
    assert s._store.dump() == before
    b2 = s.next_batch(10)
    assert not b2.attrs["reissued"] and len(b2) == 10
    assert not set(b2["item"]) & set(b["item"][:3])  # a skipped item is never asked for again
    r = s.skip(list(b2["item"]))  # a whole batch skipped closes it
    assert r.stage_closed and s.n_stages == 2
    est, st = s.estimate(), s.status(bayesian=False)
    assert st["skipped"] == 13 and "items that can be labeled" in st["skipped_note"]
    s.close()
    s2 = Session.open(str(tmp_path / "s.db"), pool)
    assert s2.n_skipped == 13 and s2.estimate().equals(est)
    assert list(s2.skipped()["reason"][:3]) == ["nobody can tell"] * 3
    assert s2.next_batch(10)["item"].isin(s2.skipped()["item"]).sum() == 0
    s2.close()


def test_refused_skips_change_nothing(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "is", seed=1)
    b = s.next_batch(5)
    s.add_labels(b["item"][:1], pool.labels[pool.index_of(b["item"][:1].to_numpy())])
    before = s._store.dump()
    other = next(i for i in pool.ids if i not in set(b["item"]))
    for items, err, words in [([b["item"].iloc[1], other], NotDrawnError, "not awaiting a label"),
                              ([b["item"].iloc[0]], LabelConflictError, "already has a label"),
                              (["no-such-item"], UnknownItemError, "no-such-item")]:
        with pytest.raises(err, match=words):
            s.skip(items)
        assert s._store.dump() == before and s.n_pending == 4 and s.n_skipped == 0
    s.add_labels(b["item"][1:], pool.labels[pool.index_of(b["item"][1:].to_numpy())])   # the batch closes
    with pytest.raises(NotDrawnError, match="no batch is open"):                      # and says so
        s.skip([other])
    s.close()
    p = Session.create(str(tmp_path / "p.db"), pool, "f1", "poisson", seed=1)
    b = p.next_batch(5)
    with pytest.raises(SessionError, match="Poisson design"):
        p.skip(b["item"][:1])
    p.close()


def test_stochastic_oracle_skip(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "is", seed=4, oracle="stochastic")
    b = s.next_batch(8)
    item = b["item"].iloc[0]
    r = s.skip([item])
    assert r.n_new == 1 and s.n_pending == int((b["item"] != item).sum())
    rest = b[b["item"] != item]
    s.add_labels(rest["item"], pool.labels[pool.index_of(rest["item"].to_numpy())], draws=rest["draw"])
    assert s.n_stages == 1 and np.isfinite(s.estimate().iloc[0])
    s.close()
    s2 = Session.open(str(tmp_path / "s.db"), pool)
    assert s2.n_skipped == 1 and s2.n_stages == 1
    s2.close()


def test_cli_skip(tmp_path, capsys, pool):
    path = tmp_path / "pool.csv"
    import pandas as pd

    pd.DataFrame({"item": pool.ids, "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}).to_csv(path, index=False)
    db = str(tmp_path / "s.db")
    assert cli_main(["session", "new", db, "--pool", str(path), "--design", "is", "--no-progress"]) == 0
    assert cli_main(["session", "next", db, "--n", "4", "--out", str(tmp_path / "b.csv"), "--no-progress"]) == 0
    items = pd.read_csv(tmp_path / "b.csv")["item"].astype(str).tolist()
    capsys.readouterr()
    assert cli_main(["session", "skip", db, *items[:2], "--reason", "blank record", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "skipped 2 item(s)" in out and "2 label(s) still missing" in out and "can be labeled" in out
    assert cli_main(["session", "skip", db, *items[2:], "--format", "json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["stage_closed"] is True
    assert cli_main(["session", "status", db, "--no-progress", "--no-bayesian"]) == 0
    assert "skipped: 4 item(s)" in capsys.readouterr().out
    assert cli_main(["session", "skip", db, "nope", "--no-progress"]) == 2
    assert "nope" in capsys.readouterr().err


def test_report_says_what_skips_do(tmp_path, capsys, pool):
    """``session report``: report.md has a section on the skipped items — how many, per stage,
    and that the estimate is of the measure on the items that can be labeled — and
    skipped.csv lists them with their reasons; without a skip there is neither."""
    import pandas as pd

    path = tmp_path / "pool.csv"
    pd.DataFrame({"item": pool.ids, "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}).to_csv(path, index=False)
    db = str(tmp_path / "s.db")
    assert cli_main(["session", "new", db, "--pool", str(path), "--design", "is", "--no-progress"]) == 0
    out = tmp_path / "rep0"
    assert cli_main(["session", "report", db, "--out", str(out), "--no-bayesian", "--no-progress"]) == 0
    assert "Skipped" not in (out / "report.md").read_text() and not (out / "skipped.csv").exists()
    skipped = []
    for stage in range(2):
        b = tmp_path / f"b{stage}.csv"
        assert cli_main(["session", "next", db, "--n", "6", "--out", str(b), "--no-progress"]) == 0
        items = pd.read_csv(b)["item"].tolist()
        assert cli_main(["session", "skip", db, *map(str, items[:stage + 1]), "--reason", f"blank {stage}",
                         "--no-progress"]) == 0
        skipped += items[:stage + 1]
        lab = pd.DataFrame({"item": items[stage + 1:], "label": pool.labels[pool.index_of(items[stage + 1:])]})
        lab.to_csv(b, index=False)
        assert cli_main(["session", "ingest", db, str(b), "--no-progress"]) == 0
    out = tmp_path / "rep"
    capsys.readouterr()
    assert cli_main(["session", "report", db, "--out", str(out), "--no-bayesian", "--no-progress"]) == 0
    assert "skipped.csv" in capsys.readouterr().out
    md = (out / "report.md").read_text()
    sec = md.split("## Skipped items", 1)[1].split("\n## ", 1)[0]
    assert "3 item(s) were skipped" in sec and "items that can be labeled" in sec
    assert "stage 0: 1, stage 1: 2" in sec
    sk = pd.read_csv(out / "skipped.csv")
    assert sorted(sk["item"]) == sorted(skipped) and set(sk["reason"]) == {"blank 0", "blank 1"}
    dr = pd.read_csv(out / "draws.csv")                      # a skipped item's draw has no label; the rest do
    assert dr.loc[dr["item"].isin(skipped), "label"].isna().all() and dr.loc[~dr["item"].isin(skipped), "label"].notna().all()
    assert not set(pd.read_csv(out / "labels.csv")["item"]) & set(skipped)
    s = Session.open(db, pool)
    assert s.skip_summary()["n"] == 3 and s.skip_summary()["caveats"] == []  # is: no stratified caveat
    s.close()


def test_skip_summary_of_the_stratified_design_says_missing_at_random(tmp_path, pool):
    s = Session.create(str(tmp_path / "st.db"), pool, "f1", "stratified", seed=2)
    assert s.skip_summary() is None
    b = s.next_batch(5)
    s.skip(b["item"][:1], reason="unreadable")
    summ = s.skip_summary()
    assert summ["n"] == 1 and summ["by_stage"] == {0: 1}
    assert any("missing at random" in c for c in summ["caveats"])
    assert list(summ["items"]["reason"]) == ["unreadable"]
    s.close()


@pytest.mark.parametrize("oracle", ["deterministic", "stochastic"])
def test_the_draws_estimate_after_skips_is_the_sessions_and_a_skipped_draw_takes_no_label(tmp_path, pool, oracle):
    """After skips, :meth:`Session.estimate_draws` (the draws' own estimate, which the report's
    PR curve reuses) is the session's estimate of every measure -- a skipped item's draws outside
    the population, the sums divided by the effective draws -- where it raised a KeyError (stop 82's
    walk: ``session report --pr-curve`` after any skip); a label file naming a skipped item's draw
    is refused by name, nothing ingested (it raised a KeyError under a stochastic oracle)."""
    from bayes_eval import measures as M

    U = _unlabelable(pool)
    s = Session.create(str(tmp_path / "s.db"), pool, ["f1", "accuracy"], "is", seed=2, oracle=oracle)
    for _ in range(3):
        b = s.next_batch(40)
        rows = pool.index_of(b["item"].to_numpy())
        if U[rows].any():
            s.skip(b["item"][U[rows]].unique())
        ok = ~U[rows]
        s.add_labels(b["item"][ok], pool.labels[rows[ok]], draws=b["draw"][ok] if oracle == "stochastic" else None)
    assert s.n_skipped > 0 and s.n_stages == 3
    est = s.estimate()
    for m in s.measures:
        np.testing.assert_allclose(np.asarray(s.estimate_draws(m).value), est[list(m.names)].to_numpy(), rtol=1e-10)
    assert np.isfinite(np.asarray(s.estimate_draws(M.pr_curve(np.array([-1.0, 0.0]))).value)).any()
    skipped = pool.ids[sorted(s._skipped)[0]]
    with pytest.raises(NotDrawnError, match="was skipped as impossible to label"):
        s.add_labels([skipped], [0], draws=[int(s.draws().query("item == @skipped")["draw"].iloc[0])]
                     if oracle == "stochastic" else None)
    s.close()
