"""The model-assisted CLT variance and its check (issue 15, item 2;
``bayes_eval.estimators.model_assisted``): the rule itself, the coverage it gives where
positives are many (with a negative control that must fail), the check flagging a pool
whose positives hide in the low-score bulk, and a session using the same variance."""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

import bayes_eval as be
from bayes_eval.cli import main as cli_main
from bayes_eval.session_cli import _status_text
from bayes_eval.estimators import MODEL_CHECK_MAX, Estimate, model_assisted
from bayes_eval.results import STOP_CHECK_MAX, labels_to_width_text
from bayes_eval.registry import measure_from_args
from bayes_eval.results import covers, stopping, summarize
from bayes_eval.simulate import run_simulation

REPEATS = 200
SE = np.sqrt(0.95 * 0.05 / REPEATS)  # binomial SE of a 95% coverage over the repeats


def _est(var, cov=None):
    var = np.asarray(var, dtype=np.float64)
    return Estimate(value=np.zeros_like(var), cov=cov, risk=np.zeros(2), n=np.asarray(10.0), var=var)


def test_the_rule_takes_the_larger_variance_only_where_the_two_agree():
    own_cov = np.array([[4.0, 1.0, 0.5], [1.0, 1.0, 0.2], [0.5, 0.2, 1.0]])
    own = _est(np.diag(own_cov), own_cov)
    model = _est([8.0, 0.5, 1.0 * (MODEL_CHECK_MAX + 1)])
    out = model_assisted(own, model)
    # component 0: ratio 2 -> the model's 8; 1: ratio 0.5 -> own 1; 2: ratio 6 > max -> own 1
    np.testing.assert_allclose(out.var, [8.0, 1.0, 1.0])
    np.testing.assert_allclose(out.check, [2.0, 0.5, MODEL_CHECK_MAX + 1])
    np.testing.assert_allclose(np.diag(out.cov), out.var)  # the covariance rescaled to the chosen variances
    assert np.all(np.linalg.eigvalsh(out.cov) > 0)  # still positive definite
    assert out.cov[0, 1] == pytest.approx(1.0 * np.sqrt(2.0))
    # own variance 0: the model's variance cannot be checked against it (unbounded ratio)
    out0 = model_assisted(_est([0.0, 0.0]), _est([1.0, 0.0]))
    assert out0.check[0] == np.inf and out0.var[0] == 0.0 and out0.check[1] == 1.0


@pytest.fixture(scope="module")
def many_positives(ais_many_positives):
    return ais_many_positives  # conftest.py: 200 AIS runs on a 4,000-item pool with 30% positives


def test_clt_covers_where_positives_are_many(many_positives):
    res = many_positives
    for c in summarize(res):
        assert c["clt_check_passed"] >= 0.9, c  # the model and the draws agree here
        assert c["coverage"] >= 0.95 - 3 * SE, c
    # negative control: the same intervals at a quarter of their width must under-cover (the
    # model-assisted interval is conservative on this small pool: ~5 × the RMSE wide)
    v, lo, hi = res.checkpoint_value[:, -1], res.checkpoint_lower[:, -1], res.checkpoint_upper[:, -1]
    q = (hi - lo) / 8
    assert covers(v - q, v + q, res.true_value).mean() < 0.95 - 3 * SE


def test_stopping_waits_for_the_check(many_positives):
    res = many_positives
    w = float(summarize(res)[0]["mean_width_cs"])
    held, free = stopping(res, w, "clt-cs"), stopping(res, w, "clt-cs", require_check=False)
    assert held["check_required"] and not free["check_required"]
    assert 0.3 < held["stopped"] <= free["stopped"]
    assert held["stopped_runs"] >= 0.9 * free["stopped_runs"]  # the check passes: it holds back few runs
    assert held["coverage"] >= 0.95 - 3 * np.sqrt(0.05 * 0.95 / held["stopped_runs"])
    # a run without the check (every stage NaN: a design without the calibrated model) is held
    # back by nothing, and the result says the check did not apply
    res_free = res._replace(history=res.history._replace(check=np.full_like(np.asarray(res.history.check), np.nan)))
    none = stopping(res_free, w, "clt-cs")
    assert not none["check_required"] and none["stopped_runs"] == free["stopped_runs"]


@pytest.mark.slow
def test_the_check_flags_positives_hidden_in_the_bulk():
    # the demo pool's kind: 0.2% positives, some scoring as low as the negatives; AIS draws the
    # low-score bulk rarely, so the model's variance there cannot be confirmed by any draw
    pool = be.demo_pool(n_items=20_000, seed=0)
    res, _ = run_simulation(pool, measure_from_args("f1", pool), "ais", budget=400, batch=50, repeats=40,
                            seed=0, checkpoints=(400,), bayes=False, track_kl=False)
    c = summarize(res)[0]
    assert c["clt_check_passed"] <= 0.5, c
    chk = res.checkpoint_check[:, 0, 0]
    assert np.all(np.isfinite(chk) | (chk == np.inf))
    # a loop stopping on the confidence sequence stops far less often when it waits for the check
    st, free = stopping(res, 0.3, "clt-cs"), stopping(res, 0.3, "clt-cs", require_check=False)
    assert st["stopped"] <= 0.5 * free["stopped"], (st, free)


def _ais_session_on_file(d, demo):
    """``demo`` written to a pool file the CLI can reopen, and a session of 4 AIS stages of 50
    labels on it (its ground truth the oracle), closed: (db path, pool file)."""
    pool_file = d / "pool.parquet"
    df = pd.DataFrame({"score": demo.scores[:, 0], "pred": demo.preds[:, 0], "label": demo.labels})
    df.index.name = "item"
    df.to_parquet(pool_file)
    pool = be.Pool.from_file(str(pool_file))
    labels = dict(zip(np.asarray(pool.ids).tolist(), np.asarray(pool.labels).tolist()))
    db = str(d / "s.db")
    s = be.Session.create(db, pool, "f1", "ais", seed=0)
    for _ in range(4):
        b = s.next_batch(50)
        s.add_labels(b["item"], [labels[i] for i in b["item"]])
    s.close()
    return db, str(pool_file)


@pytest.fixture(scope="module")
def failing_session(tmp_path_factory):
    """A session of 200 AIS labels on a pool whose positives hide in the low-score bulk (the
    check fails), from a pool file the CLI can reopen: (db path, pool file)."""
    return _ais_session_on_file(tmp_path_factory.mktemp("failing"), be.demo_pool(n_items=20_000, seed=0))


def test_a_session_does_not_stop_on_a_failed_check(failing_session):
    db, pool_file = failing_session
    s = be.Session.open(db, be.Pool.from_file(pool_file))
    assert s.clt_check()[0] > MODEL_CHECK_MAX  # positives may hide in the bulk: the check fails here
    st = s.stopping(10.0, bayesian=False)  # the confidence sequence: any interval is narrower than 10
    assert st["reached"] is False and st["clt_check_passed"] is False and "CLT check fails" in st["note"]
    assert st["width"] < 10.0
    # without a posterior the confidence sequence leads
    st = s.status(bayesian=False)
    assert st["headline_interval"] == "clt-cs" and not st["bayesian_auto"]
    assert "bayes_lower" not in st["estimates"][0]
    # the Python API's defaults are the command line's: the posterior, read first and stopped on
    st = s.status(target_width=10.0)
    assert st["headline_interval"] == "bayes" and st["bayesian_auto"] is True
    stop = st["stopping"]
    assert stop["kind"] == "bayes-checked" == s.stopping(10.0)["kind"] == s.bayes_stop_rule()
    # AIS's Bayesian rule (stop 87) also needs the CLT check's ratio at most STOP_CHECK_MAX: here the
    # draws have not reached the hidden positives, so an interval narrower than any target does not stop
    assert stop["check_ratio"] == pytest.approx(float(s.clt_check()[0]), rel=1e-12)
    assert stop["check_ratio"] > STOP_CHECK_MAX and stop["width"] < 10.0
    assert stop["reached"] is False and stop["more_labels"] is None and "CLT check's ratio" in stop["note"]
    s.close()
    # designs without AIS's check stop on the Bayesian interval narrow after each of the last 3 closed
    # stages: one stage of 20 labels never stops, however wide the target
    pool = be.Pool.from_file(pool_file)
    s = be.Session.create(db + ".early", pool, "f1", "stratified", seed=0)
    b = s.next_batch(20)
    s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    st = s.stopping(10.0, bayesian=True)
    assert st["reached"] is False and st["kind"] == "bayes-stable" and "3 closed stages" in st["note"]
    s.close()


def test_a_poisson_adaptive_session_stops_on_the_bayesian_interval_with_no_gate(tmp_path):
    """poisson-adaptive's Bayesian stopping rule is plain ``bayes`` (stop 88): the Bayesian interval of the
    last closed round at most the target wide, its companion's check recorded but no gate on its ratio
    (another scale under Poisson rounds) -- where the check fails the status reads that rule first,
    says so, and stops on a target any interval meets; on a narrow target it extrapolates."""
    pool = be.demo_pool(n_items=20_000, seed=0)
    s = be.Session.create(str(tmp_path / "pa.db"), pool, "f1", "poisson-adaptive", seed=0)
    s.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=150, batch=50)
    assert s.config["design"]["companion"] == "calibrated" and np.isfinite(s.clt_check()[0])
    assert s.bayes_stop_rule() == "bayes"
    st = s.stopping(10.0, bayesian=True)
    assert st["rule"] == st["kind"] == "bayes" and st["reached"] is True
    assert "check_ratio" not in st and "stable_widths" not in st and 0 < st["width"] < 10.0
    b = s.bayesian_interval().set_index("component").loc["f1"]
    assert st["width"] == pytest.approx(b["upper"] - b["lower"], rel=1e-12)
    narrow = s.stopping(st["width"] / 2, bayesian=True)
    assert narrow["reached"] is False and narrow["more_labels"] > 0
    # here the check fails, its ratio past AIS's gate too (positives hide in the bulk): the status reads
    # the Bayesian interval first and stops on it
    assert s.clt_check()[0] > max(MODEL_CHECK_MAX, STOP_CHECK_MAX)
    auto = s.status(target_width=10.0)
    assert auto["headline_interval"] == "bayes" and auto["stopping"]["kind"] == "bayes"
    assert auto["stopping"]["rule"] == "read-first" and auto["stopping"]["reached"] is True
    text = _status_text(auto)
    assert "the stopping rule reads it" in text and "narrow enough after the last stage" in text
    assert "reached — you can stop" in text
    s.close()


def test_a_session_uses_the_model_assisted_variance(tmp_path):
    pool = be.demo_pool(n_items=6000, positive_rate=0.1, seed=3)
    truth = dict(zip(np.asarray(pool.ids).tolist(), np.asarray(pool.labels).tolist()))
    s = be.Session.create(str(tmp_path / "s.db"), pool, "f1", "ais", seed=0)
    for _ in range(4):
        batch = s.next_batch(50)
        s.add_labels(batch["item"], [truth[i] for i in batch["item"]])
    snap = s.snapshots()[-1]
    assert snap.ew2_lab is not None and snap.design_state is not None
    est_fn = s._core.estimate_fns[0]
    args = [np.asarray(a) for a in (snap.labeled, snap.draw_counts, snap.wsum, snap.w2sum)]
    own = est_fn(*args, float(snap.n_eff), snap.prop)
    assisted = est_fn(*args, float(snap.n_eff), snap.prop, (snap.ew2_lab, snap.ew2_unl), snap.design_state)
    check = float(assisted.check[0])
    assert np.isfinite(check) and check > 0
    want = float(own.var[0]) * (max(1.0, check) if check <= MODEL_CHECK_MAX else 1.0)
    assert float(assisted.var[0]) == pytest.approx(want, rel=1e-9)
    st = s.status(bayesian=False)
    row = st["estimates"][0]
    assert row["clt_check"] == pytest.approx(check, rel=1e-9)
    assert row["clt_reliable"] == (check <= MODEL_CHECK_MAX)
    assert row["std_error"] == pytest.approx(np.sqrt(float(assisted.var[0])), rel=1e-9)
    # the report's tables carry it too (session report: summary.csv, history.csv)
    assert s.summary()["clt_check"].iloc[0] == pytest.approx(check, rel=1e-9)
    hist = s.history()
    assert hist["clt_check"].iloc[-1] == pytest.approx(check, rel=1e-9) and len(hist) == 4
    # reopened from the file, the session replays to the same variance
    s2 = be.Session.open(str(tmp_path / "s.db"), pool)
    assert s2.status(bayesian=False)["estimates"][0]["std_error"] == pytest.approx(row["std_error"], rel=1e-9)
    # status(bayesian="auto") computes the posterior only where the check fails
    auto = s2.status(bayesian="auto")
    assert auto["bayesian_auto"] == (check > MODEL_CHECK_MAX)
    assert ("bayes_lower" in auto["estimates"][0]) == (check > MODEL_CHECK_MAX)


def test_status_leads_with_the_bayesian_interval_where_the_check_fails(failing_session, capsys):
    """Issue 15, item 4: where the CLT check fails, `session status` adds the Bayesian interval
    by default, shows it first and stops on it (bayes-checked with AIS), and the check's line says to read
    it; --no-bayesian keeps the CLT-based intervals alone."""
    db, pool_file = failing_session
    assert cli_main(["session", "status", db, "--pool", pool_file, "--format", "json", "--target-width", "0.001",
                     "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    row = out["estimates"][0]
    assert out["headline_interval"] == "bayes" and out["bayesian_auto"] is True
    assert 0 <= row["bayes_lower"] <= row["bayes_upper"] <= 1
    assert row["bayes_collapsed"] is False                    # a proper interval, not a point
    stop = out["stopping"]                                    # the rule: narrow, with the check's ratio <= 60
    assert stop["kind"] == "bayes-checked" and stop["reached"] is False and stop["check_max"] == STOP_CHECK_MAX
    assert stop["width"] == pytest.approx(row["bayes_upper"] - row["bayes_lower"], rel=1e-9)
    # labels to the target at 1/sqrt(labels) and at the rate the Bayesian interval shrank since
    # the closed stage nearest half the labels (one more posterior)
    assert 0 < stop["rate_from_labels"] <= 0.75 * out["labels"]
    assert stop["width_exponent"] == pytest.approx(np.log(stop["rate_from_width"] / stop["width"])
                                                   / np.log(out["labels"] / stop["rate_from_labels"]), rel=1e-9)
    text = _status_text(out)                                  # what the CLI prints without --format json
    assert labels_to_width_text(stop) in text and "if the width shrinks as 1/sqrt(labels)" in text
    header = next(line for line in text.splitlines() if line.startswith("component"))
    assert header.index("Bayesian interval") < header.index("confidence sequence") < header.index("CLT interval")
    assert "read first: the Bayesian interval" in text and "read the Bayesian interval (shown first)" in text
    assert row["bayes_lower"] <= row["bayes_median"] <= row["bayes_upper"]   # the posterior median beside it
    inside = row["bayes_lower"] - 5e-5 <= row["estimate"] <= row["bayes_upper"] + 5e-5
    assert ("lies outside its Bayesian interval" in text) == (not inside)
    # outside by less than the printed digits is not outside (0.0000 beside a bound of 8e-246 was, stop 82)
    hair = dict(out, estimates=[dict(row, estimate=0.0, bayes_lower=7.99e-246)])
    assert "lies outside" not in _status_text(hair)
    # an estimate outside the interval it is told to read first: the text says so and gives the median
    moved = dict(out, estimates=[dict(row, estimate=row["bayes_upper"] + 0.01)])
    assert (f"note: the design's estimate of f1 ({row['bayes_upper'] + 0.01:.4f}) lies outside its Bayesian "
            f"interval; the posterior median is {row['bayes_median']:.4f}") in _status_text(moved)
    # the calibrated sampler's importance ESS: healthy here, and a warning where it would not be
    from bayes_eval.posterior import LOW_SAMPLER_ESS

    assert LOW_SAMPLER_ESS < out["posterior_sampler_ess"] <= 1024 and "rests on few parameter values" not in text
    assert "importance ESS 1.0 of 1024 proposals" in _status_text(dict(out, posterior_sampler_ess=1.0))
    assert cli_main(["session", "status", db, "--pool", pool_file, "--no-bayesian", "--format", "json",
                     "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["headline_interval"] == "clt-cs" and not out["bayesian_auto"]
    assert "bayes_lower" not in out["estimates"][0]
    # session report: report.md's estimates table leads with the Bayesian interval too
    rep = os.path.join(os.path.dirname(db), "report")
    assert cli_main(["session", "report", db, "--pool", pool_file, "--out", rep, "--no-progress"]) == 0
    capsys.readouterr()
    with open(os.path.join(rep, "report.md"), encoding="utf-8") as f:
        md = f.read()
    table = next(line for line in md.splitlines() if line.startswith("| measure"))
    assert "Read first: the Bayesian interval" in md and table.index("bayes_lower") < table.index("clt_lower")
    assert "the CLT check fails, so the CLT-based intervals are for comparison only" in md
    summ = pd.read_csv(os.path.join(rep, "summary.csv")).iloc[0]        # the posterior median beside it
    assert "bayes_median" in table and summ["bayes_lower"] <= summ["bayes_median"] <= summ["bayes_upper"]
    away = not summ["bayes_lower"] <= summ["estimate"] <= summ["bayes_upper"]
    assert ("lies outside its Bayesian interval" in md) == away


@pytest.mark.slow
def test_poisson_rounds_carry_the_check_in_simulations_and_sessions(tmp_path):
    # poisson-adaptive: the companion's predictive after each round gives the same check
    pool = be.demo_pool(n_items=20_000, seed=0)
    res, _ = run_simulation(pool, measure_from_args("f1", pool), "poisson-adaptive", budget=400, batch=100,
                            repeats=20, seed=0, checkpoints=(400,), bayes=False, track_kl=False)
    c = summarize(res)[0]
    assert c["clt_check_passed"] <= 0.5, c  # positives hidden in the bulk: flagged
    assert res.history.check is not None and np.isfinite(res.history.check).any()
    truth = dict(zip(np.asarray(pool.ids).tolist(), np.asarray(pool.labels).tolist()))
    s = be.Session.create(str(tmp_path / "p.db"), pool, "f1", "poisson-adaptive", seed=0)
    for _ in range(2):
        b = s.next_batch(100)
        s.add_labels(b["item"], [truth[i] for i in b["item"]])
    row = s.status(bayesian=False)["estimates"][0]
    assert "clt_check" in row and row["clt_reliable"] == (row["clt_check"] is not None
                                                         and row["clt_check"] <= MODEL_CHECK_MAX)
    s2 = be.Session.open(str(tmp_path / "p.db"), pool)
    assert s2.status(bayesian=False)["estimates"][0]["std_error"] == pytest.approx(row["std_error"], rel=1e-9)


def test_the_clt_check_line_reads_huge_and_unbounded_ratios_in_words():
    from bayes_eval.session_cli_text import clt_check_line as _clt_check_line

    def line(ratio):
        return _clt_check_line([{"component": "f1", "clt_reliable": False, "clt_check": ratio}])

    assert "expects 80× the variance" in line(80.0)
    assert "expects over 10^6 × the variance" in line(8.74e30) and "e+30" not in line(8.74e30)
    assert "expects an unbounded multiple of the variance" in line(None)


def test_a_fresh_session_says_there_is_nothing_to_check_yet(tmp_path):
    """Before the first stage is labeled an AIS session has no CLT check to report: the
    status says so instead of calling the check unavailable for the design."""
    from bayes_eval.session import Session
    from bayes_eval.session_cli import _status_text
    from bayes_eval.session_cli_text import clt_check_line as _clt_check_line

    from bayes_eval.cli import main as cli_main

    pool = be.demo_pool(n_items=2000, positive_rate=0.05, seed=3)
    f = tmp_path / "pool.csv"
    pd.DataFrame({"item": pool.ids, "score": pool.scores[:, 0], "pred": pool.preds[:, 0]}).to_csv(f, index=False)
    s = Session.create(str(tmp_path / "f.db"), be.load_pool(str(f)), "f1", "ais", seed=0, pool_path=str(f))
    text = _status_text(s.status(bayesian=False))
    s.close()
    assert "CLT check: nothing to check before the first stage is labeled" in text
    # and the report says the same (it called the check unavailable for ais: stop 82's walk)
    assert cli_main(["session", "report", str(tmp_path / "f.db"), "--out", str(tmp_path / "rep"), "--no-progress"]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "CLT check: nothing to check before the first stage is labeled" in md and "not available here" not in md
    assert "not available here" in _clt_check_line([{"component": "f1"}], labels=100)


def test_a_design_without_a_model_leads_with_the_bayesian_interval(tmp_path):
    """Every design has the finite-pool posterior (stop 73): a stratified session -- no model of its
    own, so no CLT check -- offers the Bayesian interval, leads with it and stops on it; the status
    text says to read the CLT-based intervals with it, not that there is none.  A stochastic
    oracle has one too (stop 75: its labels counted as observations)."""
    from bayes_eval.session import Session
    from bayes_eval.session_cli_text import clt_check_line as _clt_check_line

    pool = be.demo_pool(n_items=2000, positive_rate=0.05, seed=3)
    s = Session.create(str(tmp_path / "st.db"), pool, "f1", "stratified", seed=0)
    s.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=150, batch=50)
    st = s.status()
    row = st["estimates"][0]
    assert st["posterior_available"] is True and st["headline_interval"] == "bayes"
    assert "clt_check" not in row and 0.0 <= row["bayes_lower"] < row["bayes_upper"] <= 1.0
    assert s.stopping(0.01)["kind"] == "bayes-stable"
    text = _status_text(st)
    assert "read them with the Bayesian interval (shown first)" in text and "stochastic" not in text
    s.close()
    sto = Session.create(str(tmp_path / "sto.db"), pool, "f1", "passive", seed=0, oracle="stochastic")
    assert sto.status()["posterior_available"] is True
    sto.close()
    assert "no Bayesian interval is offered here" in _clt_check_line([{"component": "f1"}], labels=100,
                                                                     posterior=False)


@pytest.mark.slow   # ~35 s of compiles (the curve's posterior, the report); slow tier since stop 57
def test_the_pr_curves_bayesian_band_is_the_sessions_posterior(failing_session, capsys):
    """``session report --pr-curve``'s Bayesian band: the finite-pool posterior of the curve
    given the session's labels (``Session.posterior_of``), on the pool whose positives hide
    in the low-score bulk.  For the session's own measure it is the session's posterior,
    draw for draw (same model, labels and key: the labels by item reach the measure's cells
    intact); with every item labeled it is the truth at every threshold; on these 200 labels
    it holds the true precision and recall at nearly every threshold where the CLT band does
    not (the negative control); the report writes its columns and points to it."""
    import jax
    import jax.numpy as jnp

    from bayes_eval import measures as M
    from bayes_eval.estimators import normal_interval
    from bayes_eval.posterior import equal_tailed, labeled_table
    from bayes_eval.session_core import measure_posterior

    db, pool_file = failing_session
    pool = be.Pool.from_file(pool_file)
    s = be.Session.open(db, pool)
    rows, labels = s.labels_in_estimate()
    assert rows.size == s.n_labels == int(np.asarray(s._labeled).sum()) and np.array_equal(labels, pool.labels[rows])
    np.testing.assert_allclose(s.posterior_of(M.f1()), s.posterior(), rtol=0, atol=1e-12)

    t = M.default_thresholds(np.asarray(pool.scores[:, 0]), 16, spacing="uniform")   # as the report's
    pr = M.pr_curve(t)
    truth = np.asarray(pool.true_value(pr))
    lo, hi = (np.asarray(a) for a in equal_tailed(s.posterior_of(pr), 0.95))
    est = s.estimate_draws(pr)
    clo, chi = (np.asarray(a) for a in normal_interval(est.value, est.cov, 0.95))
    ok = np.isfinite(truth) & np.isfinite(clo)

    def held(a, b):
        return (a[ok] - 1e-12 <= truth[ok]) & (truth[ok] <= b[ok] + 1e-12)

    assert ok.sum() >= 20 and held(lo, hi).mean() >= 0.9 and held(clo, chi).mean() <= 0.8, \
        (held(lo, hi).mean(), held(clo, chi).mean())
    # every item labeled: the band is the truth
    mp = measure_posterior(s._core, s.pool, s.measures, s.config, pr, 1000)
    full = labeled_table(mp.item_cell, mp.n_cells, 2, np.arange(pool.n_items), pool.labels)
    exact = np.asarray(mp.sample(jax.random.PRNGKey(0), jnp.asarray(full)))
    fin = np.isfinite(truth)
    np.testing.assert_allclose(np.nanmin(exact, 0)[fin], truth[fin], atol=1e-12)
    np.testing.assert_allclose(np.nanmax(exact, 0)[fin], truth[fin], atol=1e-12)
    s.close()

    rep = os.path.join(os.path.dirname(db), "report_pr")
    assert cli_main(["session", "report", db, "--pool", pool_file, "--out", rep, "--pr-curve", "--thresholds", "16",
                     "--no-progress"]) == 0
    capsys.readouterr()
    df = pd.read_csv(os.path.join(rep, "pr_curve.csv"))
    L = len(t)
    np.testing.assert_allclose(df["precision_bayes_lower"], lo[:L], atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(df["recall_bayes_upper"], hi[L:], atol=1e-12, equal_nan=True)
    for q in ("precision", "recall"):
        b = df[[f"{q}_bayes_lower", f"{q}_bayes_median", f"{q}_bayes_upper"]].dropna().to_numpy()
        assert len(b) >= 10 and np.all(b[:, 0] <= b[:, 1] + 1e-12) and np.all(b[:, 1] <= b[:, 2] + 1e-12)
    with open(os.path.join(rep, "report.md"), encoding="utf-8") as f:
        md = f.read()
    assert "the posterior median with its Bayesian band (shaded)" in md
    assert "The Bayesian band also accounts for the items nobody labeled: read it." in md


def test_status_stops_on_the_interval_it_reads_first(tmp_path):
    """Issue 15, item 4: `session status` stops on the interval it reads first. Where the CLT check
    passes that is the confidence sequence, and `--target-width` stops on it (rule read-first:
    the Bayesian interval missed on pools whose positive rate is no logistic curve of the score,
    benchmarks/results/misspecified.md); --bayesian reads and stops on the Bayesian interval;
    --no-bayesian the confidence sequence."""
    db, pool_file = _ais_session_on_file(tmp_path, be.demo_pool(n_items=4000, positive_rate=0.1, seed=3))
    s = be.Session.open(db, be.Pool.from_file(pool_file))
    assert s.clt_check()[0] <= MODEL_CHECK_MAX          # the check passes on this pool
    cs = s.confidence_sequence()
    summ = s.summary()                                  # summary.csv carries the confidence sequence
    assert summ["cs_lower"].iloc[0] == pytest.approx(cs["lower"].iloc[0], rel=1e-12)
    assert summ["cs_upper"].iloc[0] == pytest.approx(cs["upper"].iloc[0], rel=1e-12)
    assert summ["cs_lower"].iloc[0] <= summ["clt_lower"].iloc[0] <= summ["clt_upper"].iloc[0] <= summ["cs_upper"].iloc[0]
    plain = s.status()                                  # the default, "auto": no posterior where the check passes
    assert plain["headline_interval"] == "clt-cs" and "bayes_lower" not in plain["estimates"][0]
    assert "stopping rule" not in _status_text(plain)
    st = s.status(target_width=0.9)
    row, stop = st["estimates"][0], st["stopping"]
    assert st["headline_interval"] == "clt-cs" and not st["bayesian_auto"] and "bayes_lower" not in row
    assert stop["rule"] == "read-first" and stop["kind"] == "clt-cs" and stop["reached"] is True
    assert stop["width"] == pytest.approx(row["cs_upper"] - row["cs_lower"], rel=1e-9)
    text = _status_text(st)
    assert "(the stopping rule uses it, where the CLT check passes)" in text and "read first: the Bayesian" not in text
    assert "read first: the confidence sequence widens the CLT interval" in text
    assert "stopping rule: the 95% confidence-sequence interval of f1" in text
    # --bayesian: the Bayesian interval is read first and stopped on, whatever the check
    st = s.status(target_width=0.9, bayesian=True)
    row, stop = st["estimates"][0], st["stopping"]
    assert st["headline_interval"] == "bayes" and stop["rule"] == stop["kind"] == "bayes-checked"
    assert stop["width"] == pytest.approx(row["bayes_upper"] - row["bayes_lower"], rel=1e-9)
    # the check passes here (ratio <= 5 <= 60): wide enough a target is reached on the Bayesian interval
    assert stop["reached"] is (stop["width"] < 0.9) is True and stop["check_ratio"] <= STOP_CHECK_MAX
    text = _status_text(st)
    header = next(line for line in text.splitlines() if line.startswith("component"))
    assert header.index("Bayesian interval") < header.index("confidence sequence") < header.index("CLT interval")
    assert "read first: the Bayesian interval (the finite-pool posterior: it accounts for the items nobody " \
           "labeled; the stopping rule reads it)" in text
    # --no-bayesian: no posterior, the confidence sequence leads and the rule reads it
    st = s.status(target_width=0.9, bayesian=False)
    assert st["headline_interval"] == "clt-cs" and "bayes_lower" not in st["estimates"][0]
    assert st["stopping"]["kind"] == st["stopping"]["rule"] == "clt-cs"
    s.close()
    # the report leads with the same interval as status, its stopping line the same rule; the Bayesian
    # interval is in its tables for comparison
    rep = str(tmp_path / "report")
    assert cli_main(["session", "report", db, "--pool", pool_file, "--out", rep, "--target-width", "0.9",
                     "--no-progress"]) == 0
    with open(os.path.join(rep, "report.md")) as fh:
        md = fh.read()
    assert "**Read first: the confidence sequence**" in md and "the Bayesian interval is for comparison" in md
    header = next(line for line in md.splitlines() if line.startswith("| measure"))
    assert header.index("cs_lower") < header.index("clt_lower") < header.index("bayes_lower")
    assert "Stopping rule: the 95% confidence-sequence interval of f1" in md
