"""Labeling sessions with the Poisson designs (issue 7, item 4): rounds of distinct items,
exact budgets, exact replay, the simulation's estimator, CLI."""
import json
import os
import shutil
import sqlite3

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from bayes_eval import measures as M
from bayes_eval.cli import main as cli_main
from bayes_eval.pool import Pool, demo_pool
from bayes_eval.session import Session, SessionError, clear_cache

# small trees and few strata keep compilation short; the same settings everywhere share it.
# The designs of 000 without the companion model (its sessions: tests/test_companion.py;
# its replay: tests/test_golden.py)
KW = dict(n_strata=8, depth=3, companion="none")


@pytest.fixture(scope="module")
def pool():
    return demo_pool(n_items=600, positive_rate=0.08, seed=2)


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


def truth_oracle(pool):
    return lambda batch: pool.labels[pool.index_of(batch["item"].to_numpy())]


def label(s, pool, batch):
    return s.add_labels(batch["item"], truth_oracle(pool)(batch))


def totals_and_f1():
    """F1 with its two totals as components: g returns (tp, den, f1), so the totals'
    estimates are linear in R and exactly unbiased under Poisson rounds."""
    f1 = M.f1()
    return M.Measure("f1_totals", f1.loss, lambda R: jnp.stack([R[0], R[1], R[0] / R[1]]), 2, ("tp", "den", "f1"),
                     f1.pattern)


def _unlabeled_per_cell(s):
    lab = s.snapshots()[-1].labeled if s.snapshots() else np.zeros((s.cells.n_cells, 2))
    return np.asarray(s.cells.size) - lab.sum(1)


# ---------------------------------------------------------------------------- rounds and budgets
def test_fixed_size_rounds_give_exactly_n_distinct_items(tmp_path, pool):
    s = Session.create(str(tmp_path / "s.db"), pool, ["f1", "precision"], "poisson-adaptive", seed=1, **KW)
    assert s.config["design"]["fixed_size"] == "pareto"  # exact budgets by default
    labeled = set()
    for stage in range(6):
        unl = _unlabeled_per_cell(s)
        b = s.next_batch(40)
        assert len(b) == 40 and b["item"].is_unique and not b.attrs["complete"] and not b.attrs["stalled"]
        assert not labeled & set(b["item"]), "a round asked for an item already labeled"
        assert (b["stage"] == stage).all() and ((b["q"] > 0) & (b["q"] <= 1)).all()
        np.testing.assert_allclose(b["weight"] * b["q"], 1.0 / pool.n_items, rtol=1e-12)
        # q is the round's water-filled inclusion probability b of the item's cell: Σ U_x b_x = n
        prop = s.proposal
        np.testing.assert_allclose((unl * np.asarray(prop.b)).sum(), 40.0, rtol=1e-9)
        np.testing.assert_array_equal(b["q"].to_numpy(), np.asarray(prop.b)[s.item_cell[b["item"].to_numpy()]])
        r = label(s, pool, b)
        assert r.stage_closed and r.n_new == 40
        labeled |= set(b["item"])
    assert s.n_labels == 240 == s.n_draws and s.n_stages == 6 and len(s.rounds) == 6
    d = s.draws()
    assert d["row"].is_unique and (d["new"] == 1).all()  # distinct items, never re-drawn
    assert list(s.history()["labels"].unique()) == [40, 80, 120, 160, 200, 240]
    st = s.status(bayesian=False)
    assert st["poisson"]["round_size"] == "pareto" and st["poisson"]["rounds"] == 6 and not st["poisson"]["exact"]
    est = s.estimate()
    truth = pool.true_value(M.f1())[0]
    assert abs(est["f1"] - truth) < 0.15
    p, rc = est["precision"], pool.true_value(M.precision())[0]
    assert abs(p - rc) < 0.15
    iv = s.intervals(bayesian=False)
    assert (iv["lower"] <= iv["estimate"]).all() and (iv["estimate"] <= iv["upper"]).all()


def test_random_size_rounds_and_static_design(tmp_path, pool):
    sizes = {}
    for design, fs in (("poisson-adaptive", None), ("poisson", "auto")):
        s = Session.create(str(tmp_path / f"{design}.db"), pool, "f1", design, seed=4, fixed_size=fs, **KW)
        assert s.config["design"]["fixed_size"] is None
        got, bprev = [], None
        for _ in range(8):
            b = s.next_batch(30)
            assert b["item"].is_unique and b.attrs["expected_size"] == 30.0
            got.append(len(b))
            if design == "poisson":  # nested: b_t grows with the cumulative budget; q = b_t of the item's cell
                bt = np.asarray(s.proposal.b)
                assert bprev is None or (bt >= bprev - 1e-12).all()
                bprev = bt
                np.testing.assert_allclose((np.asarray(s.cells.size) * bt).sum(), 30.0 * s.n_stages + 30.0,
                                           rtol=1e-9)
            label(s, pool, b)
        assert s.draws()["row"].is_unique
        sizes[design] = got
        assert np.isfinite(s.estimate()["f1"])
        assert s.status(bayesian=False)["poisson"]["round_size"] == "random"
    # random sizes with mean n (8 rounds of mean 30: the total is within a few sd of 240)
    for design, got in sizes.items():
        assert len(set(got)) > 1, (design, got)
        assert abs(sum(got) - 240) < 4 * np.sqrt(240), (design, got)


def test_empty_rounds_are_recorded_and_replayed(tmp_path, pool):
    """With random-size rounds of n = 1 a round often draws nothing: it is recorded
    (closed, no draws) and the next round is drawn, and a reopened session replays it."""
    p = str(tmp_path / "s.db")
    s = Session.create(p, pool, "f1", "poisson-adaptive", seed=0, fixed_size=None, **KW)
    empties = 0
    for _ in range(12):
        b = s.next_batch(1)
        empties += b.attrs["empty_rounds"]
        assert len(b) >= 1
        label(s, pool, b)
    assert empties > 0 and s.n_stages == 12 + empties
    st = s._store.stages()
    assert sum(1 for x in st if x["n_draws"] == 0) == empties and all(x["closed_at"] for x in st)
    est = s.estimate().to_numpy()
    s.close()
    shutil.copy(p, str(tmp_path / "copy.db"))
    s, s2 = Session.open(p, pool), Session.open(str(tmp_path / "copy.db"), pool)
    np.testing.assert_array_equal(s2.estimate().to_numpy(), est)
    for _ in range(4):
        b, b2 = s.next_batch(1), s2.next_batch(1)
        np.testing.assert_array_equal(b2["item"].to_numpy(), b["item"].to_numpy())
        assert b.attrs["empty_rounds"] == b2.attrs["empty_rounds"]
        label(s, pool, b)
        label(s2, pool, b2)
    np.testing.assert_array_equal(s2.estimate().to_numpy(), s.estimate().to_numpy())


# ---------------------------------------------------------------------------- exact replay
def test_reopen_after_every_round_and_mid_batch_reproduces_bit_for_bit(tmp_path, pool):
    oracle = truth_oracle(pool)
    pa, pb = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    a = Session.create(pa, pool, ["f1", "precision"], "poisson-adaptive", seed=3, **KW)
    Session.create(pb, pool, ["f1", "precision"], "poisson-adaptive", seed=3, **KW).close()
    s = Session.open(pb, pool)
    for stage in range(8):
        ba = a.next_batch(30)
        a.add_labels(ba["item"], oracle(ba))
        bb = s.next_batch(30)  # drawn by a session replayed from the file
        for col in ("item", "q", "weight"):
            np.testing.assert_array_equal(ba[col].to_numpy(), bb[col].to_numpy())
        s.add_labels(bb["item"][:10], oracle(bb)[:10])
        s.close()
        s = Session.open(pb, pool)  # mid-batch: the open round is re-issued, never redrawn
        assert list(s.pending()["item"]) == list(bb["item"][10:])
        again = s.next_batch(5)
        assert again.attrs["reissued"] and list(again["item"]) == list(bb["item"][10:])
        np.testing.assert_array_equal(np.asarray(s.proposal.b), np.asarray(a.snapshots()[-1].prop.b))
        s.add_labels(bb["item"][10:], oracle(bb)[10:])
        s.close()
        s = Session.open(pb, pool)  # after the round
        np.testing.assert_array_equal(s.estimate().to_numpy(), a.estimate().to_numpy())
        np.testing.assert_array_equal(s.intervals(bayesian=False).to_numpy(), a.intervals(bayesian=False).to_numpy())
        np.testing.assert_array_equal(np.asarray(s.proposal.b), np.asarray(a.proposal.b))
    assert a.n_labels == 240 and a.n_stages == 8
    pd.testing.assert_frame_equal(s.history().drop(columns=["opened_at", "closed_at"]),
                                  a.history().drop(columns=["opened_at", "closed_at"]))
    for ra, rb in zip(a.rounds, s.rounds):
        for k in ("b", "mean", "labeled_before", "sampled", "pred_var", "pi"):
            np.testing.assert_array_equal(ra[k], rb[k])
    assert s.integrity_check() == "ok"
    # from scratch (no cached strata, cells or compiled functions): same state, same next round
    s.close()
    clear_cache(pool)
    s3 = Session.open(pb, pool)
    np.testing.assert_array_equal(s3.estimate().to_numpy(), a.estimate().to_numpy())
    np.testing.assert_array_equal(s3.next_batch(30)["item"].to_numpy(), a.next_batch(30)["item"].to_numpy())


def test_replay_refuses_a_file_whose_probabilities_do_not_match(tmp_path, pool):
    p = str(tmp_path / "s.db")
    s = Session.create(p, pool, "f1", "poisson-adaptive", seed=5, **KW)
    label(s, pool, s.next_batch(20))
    s.next_batch(20)
    s.close()
    con = sqlite3.connect(p)
    con.execute("UPDATE draws SET q = q * 1.5 WHERE stage = 1")
    con.commit()
    con.close()
    with pytest.raises(SessionError, match="round 1 cannot be replayed"):
        Session.open(p, pool)


# ---------------------------------------------------------------------------- estimator
def test_labeling_every_item_that_can_matter_gives_the_exact_value(tmp_path, pool):
    truth = np.concatenate([pool.true_value(M.f1()), pool.true_value(M.precision())])
    for design, fs in (("poisson-adaptive", "auto"), ("poisson-adaptive", None), ("poisson", "auto")):
        s = Session.create(str(tmp_path / f"{design}-{fs}.db"), pool, ["f1", "precision"], design, seed=6,
                           fixed_size=fs, **KW)
        n_rounds = 0
        while True:
            b = s.next_batch(150)
            if b.empty:
                assert b.attrs["stalled"]
                break
            label(s, pool, b)
            n_rounds += 1
            assert n_rounds <= 8
        # 4 rounds of 150 reach the 600 items (every F1 item can matter): that round labels all left
        assert s.n_labels == pool.n_items and s.is_exact and s.status(bayesian=False)["poisson"]["exact"]
        np.testing.assert_allclose(s.estimate().to_numpy(), truth, rtol=1e-12)
        if design == "poisson-adaptive" and fs == "auto":
            assert n_rounds == 4 and s.draws()["stage"].value_counts().sort_index().tolist() == [150] * 4
        iv = s.intervals(bayesian=False)
        np.testing.assert_allclose(iv["upper"] - iv["lower"], 0.0, atol=1e-12)  # no sampling error left


def _session_vs_simulation(tmp_path, n_sessions, sim_repeats, k_se, ratio_bounds):
    from bayes_eval.simulate import run_simulation

    meas = totals_and_f1()
    small = demo_pool(n_items=300, positive_rate=0.1, seed=1)
    opts = dict(form="sqrt", defensive=0.0, weights="equal")
    oracle = truth_oracle(small)
    vals = []
    for seed in range(n_sessions):
        s = Session.create(str(tmp_path / f"{seed}.db"), small, [meas], "poisson-adaptive", seed=seed,
                           fixed_size=None, poisson_options=opts, **KW)
        for _ in range(3):
            b = s.next_batch(40)
            s.add_labels(b["item"], oracle(b))
        vals.append(s.estimate().to_numpy())
        s.close()
    vals = np.asarray(vals)
    truth = small.true_value(meas)
    se = vals.std(0, ddof=1) / np.sqrt(len(vals))
    for j in range(2):  # the totals
        assert abs(vals[:, j].mean() - truth[j]) <= k_se * se[j], (j, vals[:, j].mean(), truth[j], se[j])
    res, _ = run_simulation(small, meas, "poisson-adaptive", budget=120, batch=40, repeats=sim_repeats, seed=0,
                            checkpoints=(120,), **KW, **opts)
    sim = res.checkpoint_value[:, 0, :]
    lo, hi = ratio_bounds
    for j in range(3):
        ratio = vals[:, j].std(ddof=1) / sim[:, j].std(ddof=1)
        assert lo <= ratio <= hi, (j, ratio)
    se_diff = np.sqrt(vals[:, 2].var(ddof=1) / len(vals) + sim[:, 2].var(ddof=1) / len(sim))
    assert abs(vals[:, 2].mean() - sim[:, 2].mean()) <= k_se * se_diff


def test_session_estimate_is_unbiased_and_matches_the_simulation(tmp_path):
    """Random-size rounds are exactly unbiased (000 App. E): over 60 seeds the mean of the
    session's estimates of the two totals is within 4 SE of the truth, and their spread
    matches ``simulate_poisson``'s on the same pool and settings (the same estimator on the
    same design, item level against cell level): the ratio of the two standard deviations
    within [0.65, 1.55] (±4 SE of the log-ratio for 60 and 200 samples).  160 seeds and
    tighter bounds: the slow twin."""
    _session_vs_simulation(tmp_path, n_sessions=60, sim_repeats=200, k_se=4.0, ratio_bounds=(0.65, 1.55))


@pytest.mark.slow
def test_session_estimate_is_unbiased_and_matches_the_simulation_160_seeds(tmp_path):
    _session_vs_simulation(tmp_path, n_sessions=160, sim_repeats=500, k_se=4.0, ratio_bounds=(0.75, 1.33))


def test_poisson_sessions_carry_the_posterior_model(tmp_path, pool):
    """The Bayesian interval needs only the labeled counts per cell, whatever chose the
    items: both Poisson designs get the calibrated finite-pool posterior model of the
    other designs (the posterior itself: the slow test below)."""
    for design in ("poisson", "poisson-adaptive"):
        s = Session.create(str(tmp_path / f"{design}.db"), pool, "f1", design, seed=2, **KW)
        assert s.posterior_model().name == "calibrated-beta"
        s.close()


@pytest.mark.slow
def test_bayesian_interval_for_poisson_sessions(tmp_path, pool):
    """(~15 s: the first posterior compiles) The finite-pool posterior of a static
    Poisson session, as ``Session.posterior`` computes it for AIS."""
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "poisson", seed=2, **KW)
    s.run(truth_oracle(pool), budget=90, batch=30)
    b = s.bayesian_interval(n_draws=200).iloc[0]  # the calibrated finite-pool posterior, as for AIS
    assert b["kind"] == "bayes" and 0.0 <= b["lower"] <= b["upper"] <= 1.0
    draws = s.posterior(n_draws=200)
    assert draws.shape == (200, 1) and np.isfinite(draws).all()
    assert s.posterior_model().name == "calibrated-beta"


# ---------------------------------------------------------------------------- bad input
def test_bad_settings_are_refused(tmp_path, pool):
    p = str(tmp_path / "s.db")
    with pytest.raises(SessionError, match="deterministic oracle"):
        Session.create(p, pool, "f1", "poisson-adaptive", oracle="stochastic", **KW)
    with pytest.raises(SessionError, match="random size"):
        Session.create(p, pool, "f1", "poisson", fixed_size="pareto", **KW)
    with pytest.raises(SessionError, match="unknown Poisson option"):
        Session.create(p, pool, "f1", "poisson-adaptive", poisson_options={"nope": 1}, **KW)
    with pytest.raises(SessionError, match="weights"):
        Session.create(p, pool, "f1", "poisson-adaptive", poisson_options={"weights": "bogus"}, **KW)
    with pytest.raises(SessionError, match="fixed_size"):
        Session.create(p, pool, "f1", "poisson-adaptive", fixed_size="sometimes", **KW)
    with pytest.raises(SessionError, match="Poisson designs"):
        Session.create(p, pool, "f1", "ais", fixed_size=None, **KW)
    with pytest.raises(SessionError, match="unknown design"):
        Session.create(p, pool, "f1", "poisson-static", **KW)
    assert not os.path.exists(p)
    s = Session.create(p, pool, "f1", "poisson-adaptive", seed=0, **KW)
    with pytest.raises(SessionError, match="estimate_draws"):
        s.estimate_draws()
    with pytest.raises(SessionError, match="positive integer"):
        s.next_batch(0)


# ---------------------------------------------------------------------------- CLI
def _cli(capsys, *argv):
    rc = cli_main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_poisson_adaptive_session(tmp_path, capsys, pool):
    pool_file = tmp_path / "pool.parquet"
    df = pd.DataFrame({"score": pool.scores[:, 0], "pred": pool.preds[:, 0], "label": pool.labels})
    df.index.name = "item"
    df.to_parquet(pool_file)
    db = str(tmp_path / "p.db")
    # --companion none: every CLI call reopens the session and compiles its core again (a new
    # Pool object per call); without the companion model that is ~5x cheaper
    rc, out, err = _cli(capsys, "session", "new", db, "--pool", str(pool_file), "--design", "poisson-adaptive",
                        "--strata", "8", "--depth", "3", "--seed", "1", "--companion", "none", "--format", "json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["design"] == "poisson-adaptive" and info["poisson"]["round_size"] == "exact"
    truth = pd.read_parquet(pool_file)["label"]
    for k in range(3):
        batch = str(tmp_path / f"batch{k}.csv")
        rc, out, err = _cli(capsys, "session", "next", db, "--n", "25", "--out", batch)
        assert rc == 0 and "wrote 25 item(s)" in out, err
        b = pd.read_csv(batch)
        assert list(b.columns) == ["item", "label"] and len(b) == 25 and b["label"].isna().all()
        b["label"] = truth.loc[b["item"]].to_numpy()
        b.to_csv(batch, index=False)
        rc, out, err = _cli(capsys, "session", "ingest", db, batch)
        assert rc == 0 and "25 new label(s)" in out, err
    rc, out, err = _cli(capsys, "session", "status", db, "--format", "json", "--target-width", "0.05",
                        "--no-bayesian")
    assert rc == 0, err
    st = json.loads(out)
    assert st["labels"] == 75 and st["stages"] == 3 and st["design"] == "poisson-adaptive"
    assert st["estimates"][0]["component"] == "f1" and st["estimates"][0]["clt_lower"] is not None
    assert {"ess", "max_weight", "draws", "stopping", "poisson"} <= set(st) and st["draws"] == 75
    rc, out, err = _cli(capsys, "session", "status", db, "--no-bayesian")
    assert rc == 0 and "labels spent: 75" in out and "Poisson rounds: 3 (exact size)" in out
    rep = tmp_path / "report"
    rc, out, err = _cli(capsys, "session", "report", db, "--out", str(rep), "--no-bayesian")
    assert rc == 0 and (rep / "report.md").exists(), err
    # random-size rounds and bad settings from the command line
    rc, out, err = _cli(capsys, "session", "new", str(tmp_path / "r.db"), "--pool", str(pool_file), "--design",
                        "poisson-adaptive", "--poisson-size", "random", "--poisson-option", "weights=linear",
                        "--strata", "8", "--depth", "3", "--companion", "none", "--format", "json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["poisson"]["round_size"] == "random" and info["poisson"]["weights"] == "linear"
    rc, out, err = _cli(capsys, "session", "new", str(tmp_path / "x.db"), "--pool", str(pool_file), "--design",
                        "poisson-adaptive", "--oracle", "stochastic")
    assert rc == 2 and "deterministic oracle" in err and not os.path.exists(tmp_path / "x.db")



def test_report_pr_curve_of_a_poisson_session_is_the_posteriors(tmp_path, capsys, pool):
    """The Poisson designs estimate only the measures they were created with (from the round
    records), so ``session report --pr-curve`` draws the curve the posterior gives: its
    median and Bayesian band, no estimate or CLT band; without the posterior it says why no
    curve is drawn."""
    pool_file = tmp_path / "pool.parquet"
    pd.DataFrame({"score": pool.scores[:, 0], "pred": pool.preds[:, 0], "label": pool.labels}).to_parquet(pool_file)
    db = str(tmp_path / "p.db")
    s = Session.create(db, Pool.from_file(str(pool_file)), "f1", "poisson-adaptive", seed=1, n_strata=8, depth=3,
                       companion="none", pool_path=str(pool_file))
    s.run(truth_oracle(s.pool), budget=75, batch=25)
    s.close()
    rep = tmp_path / "report"
    rc, out, err = _cli(capsys, "session", "report", db, "--out", str(rep), "--pr-curve", "--thresholds", "8")
    assert rc == 0, err
    df = pd.read_csv(rep / "pr_curve.csv")
    assert df["precision"].isna().all() and df["recall_lower"].isna().all()
    b = df[["recall_bayes_lower", "recall_bayes_median", "recall_bayes_upper"]].to_numpy()
    assert np.isfinite(b).all() and np.all(b[:, 0] <= b[:, 1] + 1e-12) and np.all(b[:, 1] <= b[:, 2] + 1e-12)
    # the truth's recall at each threshold lies in the band at most thresholds (75 of 600 items labeled)
    t = df["threshold"].to_numpy(float)
    truth = np.asarray(pool.true_value(M.pr_curve(t)))[len(t):]
    assert np.mean((b[:, 0] - 1e-12 <= truth) & (truth <= b[:, 2] + 1e-12)) >= 0.75
    md = (rep / "report.md").read_text()
    assert "The curve is the posterior's alone" in md and "PR curve not drawn" not in md
    assert (rep / "pr_curve.png").exists()
    rep2 = tmp_path / "report2"
    rc, out, err = _cli(capsys, "session", "report", db, "--out", str(rep2), "--pr-curve", "--no-bayesian")
    assert rc == 0, err
    md = (rep2 / "report.md").read_text()   # said in the command line's words, not the Python API's
    assert "PR curve not drawn: the design's estimate of a measure the session was not created with" in md, md
    assert "estimate_draws" not in md and "--measure pr_curve" in md

def test_stage_draws_are_independent_of_a_pool_generated_with_the_same_seed(tmp_path):
    """A round's items are drawn independently of the labels: on ``demo_pool(seed=0)`` a
    Poisson session of seed 0 draws as many positives as its inclusion probabilities say
    (within 4 sd).  Before the stream constant of ``drawing.stage_rng`` its stage-0
    generator was ``default_rng(0)``, the pool's own: 385 of 386 items drawn were positives."""
    from bayes_eval.drawing import stage_rng

    assert not np.array_equal(stage_rng(0, 0).random(4), np.random.default_rng(0).random(4))
    pool = demo_pool(n_items=3000, positive_rate=0.1, seed=0)
    with Session.create(str(tmp_path / "s.db"), pool, "f1", "poisson", seed=0) as s:
        b = s.next_batch(200)
        bi = np.asarray(s._open["round"]["draw_b"])[s._core.item_cell]
    y = pool.labels.astype(float)
    drawn = y[pool.index_of(b["item"].to_numpy())].sum()
    mean, sd = float(np.sum(bi * y)), float(np.sqrt(np.sum(bi * (1 - bi) * y)))
    assert abs(drawn - mean) <= 4 * sd + 1, (drawn, mean, sd)
