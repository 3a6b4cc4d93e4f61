"""A session's further measures must be measures the design's draws can estimate (001 §3.3.1).

AIS, static IS and OASIS draw nothing where the first measure -- the one the design targets --
has a zero loss at every label.  In a session of ``precision, recall`` AIS never drew a
predicted negative, so recall read 1.0000 (truth 0.83) with a CLT check that "passed" (stop
82's new-user walk).  Creation now refuses such measures, naming the ways out; a session made
before (reopened) says its estimates are none and leads with the Bayesian interval.
"""
import numpy as np
import pandas as pd
import pytest

import bayes_eval.session as session_mod
from bayes_eval import measures as M
from bayes_eval.cli import main as cli_main
from bayes_eval.errors import SessionError
from bayes_eval.pool import demo_pool
from bayes_eval.registry import load_pool
from bayes_eval.session import Session


def _pool():
    return demo_pool(n_items=3000, positive_rate=0.05, seed=4)


@pytest.mark.parametrize("measures, design, far", [
    (["precision", "recall"], "ais", "recall"),
    (["precision", "accuracy"], "ais", "accuracy"),
    (["precision", "f1"], "is", "f1"),
])
def test_creation_refuses_a_measure_the_design_never_draws_for(tmp_path, measures, design, far):
    pool = _pool()
    path = tmp_path / "s.db"
    with pytest.raises(SessionError) as e:
        Session.create(str(path), pool, measures, design, seed=0, n_strata=16, depth=4)
    msg = str(e.value)
    n_neg = int(np.sum(pool.preds[:, 0] == 0))   # precision's loss is zero on every predicted negative
    assert f"'{far}' ({n_neg:,} items)" in msg and f"design for 'precision' never draws" in msg, msg
    assert f"list '{far}' first" in msg and ("--delta 0.05" in msg) == (design == "ais"), msg
    assert not path.exists()   # refused before the file is made


@pytest.mark.parametrize("measures, design, kw", [
    (["f1", "precision", "recall"], "ais", {}),      # F1's draws reach every item precision and recall count
    (["recall", "precision"], "ais", {}),            # recall's reach every item that may be positive: all
    (["precision", "recall"], "passive", {}),        # passive sampling reaches every item
    (["precision", "recall"], "ais", {"delta": 0.05}),   # a share of p(x) in every proposal
])
def test_measures_the_draws_reach_are_taken(tmp_path, measures, design, kw):
    s = Session.create(str(tmp_path / "s.db"), _pool(), measures, design, seed=0, n_strata=16, depth=4, **kw)
    assert s.unreached == []
    s.close()


def test_a_session_made_before_the_refusal_says_its_estimates_are_none(tmp_path, monkeypatch, capsys):
    """Made with the check off (as before stop 82), labeled with the truth: the reopened session
    names recall as no estimate, its IS value is the biased 1.0 the walk saw, the Bayesian
    interval leads and holds the truth, and the status line says why."""
    d = _pool()
    f = tmp_path / "pool.csv"
    pd.DataFrame({"item": d.ids, "score": d.scores[:, 0], "pred": d.preds[:, 0], "label": d.labels}).to_csv(f, index=False)
    pool = load_pool(str(f))
    path = str(tmp_path / "old.db")
    monkeypatch.setattr(session_mod, "unreached_measures", lambda *a: [])
    s = Session.create(path, pool, ["precision", "recall"], "ais", seed=1, n_strata=16, depth=4, pool_path=str(f))
    truth = dict(zip(pool.ids.tolist(), pool.labels.tolist()))
    s.run(lambda b: [truth[i] for i in b["item"]], budget=150, batch=50)
    s.close()
    monkeypatch.undo()

    s = Session.open(path, pool)
    n_neg = int(np.sum(pool.preds[:, 0] == 0))
    assert s.unreached == [("recall", n_neg)]
    rec_true = float(pool.true_value(M.recall())[0])
    assert rec_true < 0.95
    st = s.status()
    rows = {c["component"]: c for c in st["estimates"]}
    assert rows["recall"].get("unreached") and "unreached" not in rows["precision"]
    assert rows["recall"]["estimate"] > rec_true + 0.03   # the bias the walk saw: no predicted negative drawn
    assert st["headline_interval"] == "bayes" and rows["recall"]["clt_reliable"] is False
    assert rows["recall"]["bayes_lower"] <= rec_true <= rows["recall"]["bayes_upper"], rows["recall"]
    assert st["unreached_measures"] == [{"measure": "recall", "items": n_neg}]
    s.close()

    # the text (no second posterior: the line does not depend on it)
    rc = cli_main(["session", "status", path, "--no-bayesian"])
    out = capsys.readouterr().out
    assert rc == 0 and f"NOT ESTIMATES: recall ({n_neg:,} items)" in out, out
    assert "CLT check: NOT RELIABLE for recall" not in out, out   # the check line does not give a false reason
    rc = cli_main(["session", "report", path, "--out", str(tmp_path / "rep"), "--no-bayesian"])
    capsys.readouterr()
    assert rc == 0 and "NOT ESTIMATES: recall" in (tmp_path / "rep" / "report.md").read_text()
    assert pd.read_csv(tmp_path / "rep" / "summary.csv").shape[0] == 2


def test_a_measure_given_twice_is_refused(tmp_path):
    """Two identical rows of every table ("NOT RELIABLE for f1:f1, f1:f1"): refused by name; two
    F-scores of different β are two measures."""
    with pytest.raises(SessionError, match="measure 'f1' is given twice"):
        Session.create(str(tmp_path / "d.db"), _pool(), ["f1", "f1"], "passive", seed=0)
    s = Session.create(str(tmp_path / "b.db"), _pool(), [{"name": "fbeta", "beta": 2}, {"name": "fbeta", "beta": 0.5}],
                       "passive", seed=0)
    assert len(s.measures) == 2
    s.close()
