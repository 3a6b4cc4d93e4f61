"""Stored stage states (bayes_eval/session_replay.py): a reopened session restores the
design's state of every closed stage from the file instead of running the compiled step,
and ends in exactly the state a full replay gives; stages without a usable stored state
(another version, a damaged blob, an empty Poisson round's lost write) are recomputed."""
import sqlite3

import numpy as np
import pytest

from bayes_eval import session_replay
from bayes_eval.pool import demo_pool
from bayes_eval.session import Session
from bayes_eval.stages import Closing, PoissonRounds, ReplacementStages


@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=2000, positive_rate=0.1, seed=11)


def _run(path, pool, design, oracle="deterministic", stages=4, n=20):
    s = Session.create(str(path), pool, "f1", design, seed=3, oracle=oracle)
    for _ in range(stages):
        b = s.next_batch(n)
        rows = pool.index_of(b["item"].to_numpy())
        s.add_labels(b["item"], pool.labels[rows], draws=b["draw"] if oracle == "stochastic" else None)
    s.close()


def _state(s):
    """Everything a reopened session is: per-stage snapshots and estimates, the proposal,
    the next batch."""
    snaps = s.snapshots()
    est = [s._values(i) for i in range(len(snaps))]
    prop = s._kind.prop
    leaves = [np.asarray(x) for x in (prop if isinstance(prop, tuple) else [prop])]
    return snaps, est, leaves


def _same(a, b):
    (sa, ea, pa), (sb, eb, pb) = a, b
    assert len(sa) == len(sb)
    for x, y in zip(sa, sb):
        for f in ("labeled", "draw_counts", "wsum", "w2sum"):
            np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
    for (va, sa_), (vb, sb_) in zip(ea, eb):
        np.testing.assert_array_equal(va, vb)
        np.testing.assert_array_equal(sa_, sb_)
    for x, y in zip(pa, pb):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("design,oracle", [("ais", "deterministic"), ("ais", "stochastic"),
                                           ("poisson-adaptive", "deterministic")])
def test_reopen_restores_the_stored_states_without_the_step(tmp_path, pool, monkeypatch, design, oracle):
    """Every closed stage has a stored state; reopening uses them (the step is never run:
    it raises here) and gives the state of a full replay, bit for bit, and the same next batch."""
    path = tmp_path / "s.db"
    _run(path, pool, design, oracle)
    con = sqlite3.connect(path)
    n_states = con.execute("SELECT COUNT(*) FROM stage_states").fetchone()[0]
    n_closed = con.execute("SELECT COUNT(*) FROM stages WHERE closed_at IS NOT NULL").fetchone()[0]
    con.close()
    assert n_states == n_closed >= 4

    with monkeypatch.context() as m:  # a full replay: no stored state used
        m.setattr(session_replay.SessionReplay, "_stored_closings", lambda self: {})
        with Session.open(str(path), pool) as s:
            full = _state(s)
            nb_full = s._kind.draw(s.n_stages, 20, s._labeled, s._lab, s._skipped).rows

    kind = PoissonRounds if design.startswith("poisson") else ReplacementStages

    def no_step(*a, **k):
        raise AssertionError("the compiled step ran on reopen")

    with monkeypatch.context() as m:
        m.setattr(kind, "close", no_step)
        with Session.open(str(path), pool) as s:
            fast = _state(s)
            nb_fast = s._kind.draw(s.n_stages, 20, s._labeled, s._lab, s._skipped).rows
    _same(full, fast)
    np.testing.assert_array_equal(nb_full, nb_fast)


def test_states_of_another_version_or_damaged_are_recomputed(tmp_path, pool):
    path = tmp_path / "s.db"
    _run(path, pool, "ais")
    with Session.open(str(path), pool) as s:
        want = _state(s)
    con = sqlite3.connect(path)
    con.execute("UPDATE stage_states SET key='another-version' WHERE stage=1")
    con.execute("UPDATE stage_states SET state=X'00010203' WHERE stage=2")
    con.execute("DELETE FROM stage_states WHERE stage=3")
    con.commit()
    con.close()
    with Session.open(str(path), pool) as s:
        _same(want, _state(s))
        # the session goes on and stores the state of the stage it closes
        b = s.next_batch(20)
        s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
        assert [r[0] for r in s._store.stage_states()][-1] == s.n_stages - 1


def test_a_stored_state_is_what_the_reopened_session_uses(tmp_path, pool):
    """Not merely recomputed: a stored proposal, altered in the file, is the one the
    reopened session has (so the fast path is the path taken)."""
    path = tmp_path / "s.db"
    _run(path, pool, "ais", stages=2)
    con = sqlite3.connect(path)
    stage, key, blob = con.execute("SELECT stage, key, state FROM stage_states ORDER BY stage DESC").fetchone()
    closing = session_replay.decode_closing(blob)
    unl = np.asarray(closing.prop.unl)
    altered = closing._replace(prop=closing.prop._replace(unl=unl[::-1].copy()))
    con.execute("UPDATE stage_states SET state=? WHERE stage=?", (session_replay.encode_closing(altered), stage))
    con.commit()
    con.close()
    with Session.open(str(path), pool) as s:
        np.testing.assert_array_equal(np.asarray(s._kind.prop.unl), unl[::-1])


def test_codec_is_exact_and_refuses_foreign_classes():
    import collections

    from bayes_eval.kernel import Tallies

    t = Tallies(*(np.random.default_rng(0).normal(size=(3, 2)) for _ in Tallies._fields))
    c = Closing(t, None, (np.float64(np.nan), 1.5, np.arange(3)), {"b": np.array([np.inf, 0.25]), "complete": True,
                                                                   "budget": 20.0, "n": 3})
    back = session_replay.decode_closing(session_replay.encode_closing(c))
    for x, y in zip(back.state, t):
        np.testing.assert_array_equal(x, y)
    assert type(back.state) is Tallies and back.prop_used is None
    assert np.isnan(back.prop[0]) and back.prop[1] == 1.5 and back.round["complete"] is True
    np.testing.assert_array_equal(back.round["b"], [np.inf, 0.25])
    Foreign = collections.namedtuple("Foreign", "a")
    with pytest.raises(TypeError):
        session_replay.encode_closing(Closing(Foreign(1), None, None))
