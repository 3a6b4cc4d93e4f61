"""On-demand evaluation (seed 003, issue 17): the claims of 003 proved on small universes,
interval coverage, the session's store safety and the CLI."""
from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from bayes_eval import ondemand as od
from bayes_eval import ondemand_sim as sim
from bayes_eval.errors import (EmptyInputError, LabelConflictError, MalformedInputError, NotDrawnError,
                               SessionError, UnknownItemError)
from bayes_eval.ondemand_session import OnDemand

# a tiny universe: 5 instances, 2 systems with weighted / uniform p, overlapping on {1, 2}
F = np.array([1, 0, 1, 1, 0])
P = np.array([[.5, 0], [.3, .25], [.2, .25], [0, .25], [0, .25]])


def _every_sample(R_items, n, cells, cell, F):
    """Every sample of fixed sizes ``n`` (stratum j: n[j] draws with replacement from the
    universe's items by ``R_items[j]``, shape (M, U)) with nonzero probability: (its
    probability, its tally of the correct-flags ``F``)."""
    M, U = R_items.shape
    for combo in itertools.product(*[list(itertools.product(range(U), repeat=k)) for k in n]):
        prob = np.prod([np.prod(R_items[j, list(c)]) for j, c in enumerate(combo)])
        if prob == 0:
            continue
        items = np.array([x for c in combo for x in c], dtype=np.int64)
        strata = np.array([j for j, c in enumerate(combo) for _ in c], dtype=np.int64)
        yield prob, od.tally(M, len(cells.size), strata, cell[items], F[items])


def _enumerate(n, P=P, F=F):
    """Every sample (ordered draws of n_j from p_j) with its probability and the joint
    estimates (003 §"Joint estimator")."""
    cells, cell = od.cells_of(P)
    for prob, T in _every_sample(P.T, n, cells, cell, F):
        yield prob, od.joint_estimates(cells, T, n, np.array(1.0), np.array(0.0)), T, cells


@pytest.mark.parametrize("n", [(1, 1), (2, 2), (3, 1), (1, 3)])
def test_joint_precision_is_unbiased_exact_enumeration(n):
    """003's claim, exactly: E[π̂ᵢ] = πᵢ summing over every possible sample; and the
    stratified variance estimate is unbiased for the true variance (strata of ≥ 2)."""
    truth = (P * F[:, None]).sum(0)
    E = np.zeros(2)
    E2 = np.zeros(2)
    EV = np.zeros(2)
    total = 0.0
    for prob, est, _, _ in _enumerate(n):
        total += prob
        E += prob * est.value[:2]
        E2 += prob * est.value[:2] ** 2
        EV += prob * np.diag(est.cov)[:2]
    assert total == pytest.approx(1.0)
    np.testing.assert_allclose(E, truth, rtol=0, atol=1e-12)
    if min(n) >= 2:
        np.testing.assert_allclose(EV, E2 - E ** 2, rtol=1e-10)


def test_w_ii_positive_keeps_q_positive_on_X_i():
    """w_ii > 0 (n_i ≥ 1) keeps q_i > 0 on X_i, whatever the overlaps (003 §"Joint estimator")."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        G = rng.random((30, 4)) < 0.3
        G[rng.integers(0, 30, 4), np.arange(4)] = True
        cells, _ = od.cells_of(G / G.sum(0))
        n = rng.integers(1, 20, 4)
        W = od.mixture_weights(cells, n)
        assert np.all(np.diag(W) > 0)
        Q = od.proposals(cells, W)
        assert np.all(Q[cells.P > 0] > 0)
    # and without a draw of its own, a system with instances no one else predicted is uncovered
    cells, _ = od.cells_of(P)
    Q = od.proposals(cells, od.mixture_weights(cells, [0, 3]))
    assert np.any((cells.P[:, 0] > 0) & (Q[:, 0] <= 0))
    assert od.variance_bound(cells, np.array([0.0, 3.0]), 0, np.full(len(cells.size), .5)) == np.inf


def test_joint_precision_unbiased_monte_carlo_larger_universe():
    """Monte Carlo on a synthetic universe of 10⁴ candidates and 5 systems, fixed n: the mean
    of π̂ is within 4 Monte Carlo SE of the truth for every system."""
    s = sim.synthetic_setting(5, n_candidates=10_000, n_correct=600, seed=2)
    truth = sim.truth_of(s)
    cells, cx = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    cell = np.full(len(s.truth), -1)
    cell[s.G.any(1)] = cx
    rng = np.random.default_rng(5)
    n = np.array([30, 5, 20, 3, 10])
    R = 2000
    members = [np.flatnonzero(s.G[:, j]) for j in range(5)]
    items = np.concatenate([members[j][rng.integers(0, len(members[j]), (R, n[j]))] for j in range(5)], axis=1)
    strata = np.repeat(np.arange(5), n)[None, :].repeat(R, 0)
    T = od.tally(5, len(cells.size), strata, cell[items], s.truth[items].astype(int))
    pi, nu, cov = od.joint_parts(cells, T, n)
    err = pi - truth[:5]
    se = err.std(0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(err.mean(0)) < 4 * se), (err.mean(0), se)
    # the delta-method variance matches the spread of the estimates (within 15%)
    np.testing.assert_allclose(np.diagonal(cov, axis1=1, axis2=2)[:, :5].mean(0), err.var(0), rtol=0.15)


def test_pooled_recall_is_consistent():
    """ν̂ᵢ → νᵢ as the draws grow (003 §"Estimating recall jointly"): the error shrinks like
    1/√n and is within 4 delta-method SE at the largest n."""
    s = sim.synthetic_setting(4, n_candidates=10_000, n_correct=600, seed=4)
    X = s.G.any(1)
    Y = s.truth & X
    nu_true = (s.G & Y[:, None]).sum(0) / Y.sum()
    cells, cx = od.cells_of(s.G[X] / s.G.sum(0))
    cell = np.full(len(s.truth), -1)
    cell[X] = cx
    rng = np.random.default_rng(1)
    members = [np.flatnonzero(s.G[:, j]) for j in range(4)]
    errs = []
    for k in (50, 800, 12800):
        n = np.full(4, k)
        items = np.concatenate([members[j][rng.integers(0, len(members[j]), (8, k))] for j in range(4)], axis=1)
        strata = np.repeat(np.arange(4), k)[None, :].repeat(8, 0)
        T = od.tally(4, len(cells.size), strata, cell[items], s.truth[items].astype(int))
        nu, psi = od.pooled_recall_influence(cells, T, n)
        errs.append(np.sqrt(np.mean((nu - nu_true) ** 2)))
        se = np.sqrt(np.diagonal(od.stratified_cov(T, psi), axis1=1, axis2=2))
    assert errs[2] < errs[1] < errs[0]
    assert errs[2] < 0.01
    assert np.all(np.abs(nu - nu_true) < 4 * se)


def test_recall_product_identity():
    """ρᵢ = θ νᵢ exactly on a universe (003 footnote: pool recall × pooled recall)."""
    s = sim.synthetic_setting(3, n_candidates=5_000, n_correct=300, seed=0)
    X = s.G.any(1)
    theta = (s.truth & X).sum() / s.truth.sum()
    nu = (s.G & s.truth[:, None]).sum(0) / (s.truth & X).sum()
    np.testing.assert_allclose(theta * nu, sim.truth_of(s)[3:6])


def test_variance_bound_decreases_and_bisection_is_minimal():
    s = sim.synthetic_setting(4, n_candidates=8_000, n_correct=500, seed=1)
    cells, _ = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    fill = np.full(len(cells.size), 0.5)
    n = np.array([200.0, 150.0, 0.0, 0.0])
    V = [od.variance_bound(cells, np.array([200., 150., k, 0.]), 2, fill) for k in range(1, 400, 7)]
    assert np.all(np.diff(V) <= 1e-15)
    k = od.required_draws(cells, n, 2, fill, 0.05, 5000)
    hw = lambda k: od.Z95 * np.sqrt(od.variance_bound(cells, np.array([200., 150., k, 0.]), 2, fill))  # noqa: E731
    assert hw(k) <= 0.05 < hw(k - 1)
    # the simple estimator's rule with f̃ = ½ is z²/(4ε²) draws
    ks = od.required_draws(cells, n, 2, fill, 0.05, 5000, joint=False)
    assert ks == int(np.ceil(od.Z95 ** 2 / (4 * 0.05 ** 2)))
    assert k < ks  # the overlap with systems 1 and 2 lets the joint estimator draw less


def test_f1_and_difference_delta_method_against_monte_carlo():
    """The covariance of (π̂, ν̂) feeds F1 and paired differences: their delta-method
    variances match the Monte Carlo spread (fixed n, exhaustive sample of 400)."""
    s = sim.synthetic_setting(3, n_candidates=10_000, n_correct=600, seed=7)
    r = sim.simulate(s, epsilon=0.08, repeats=300, seed=3, pairs=((0, 1), (1, 2)))
    for key in ("joint", "simple"):
        v, hw = r["runs"][key]["value"], r["runs"][key]["hw"]
        ratio = (hw / od.Z95).mean(0) ** 2 / v.var(0)
        assert np.all((ratio > 0.6) & (ratio < 1.6)), (key, ratio)
        d, dhw = r["runs"][key]["diff"], r["runs"][key]["diff_hw"]
        ratio = (dhw / od.Z95).mean(0) ** 2 / d.var(0)
        assert np.all((ratio > 0.6) & (ratio < 1.6)), (key, ratio)


def test_simulation_small_is_coherent():
    s = sim.synthetic_setting(4, n_candidates=10_000, n_correct=600, seed=11)
    out = sim.summarize(sim.simulate(s, epsilon=0.08, repeats=40, seed=0))
    assert out["cost"]["joint"] < out["cost"]["simple"]
    for row in out["systems"]:
        for m in ("precision", "recall", "f1"):
            assert set(row[m]) == {"true", "simple", "joint"}
            assert row[m]["joint"]["coverage"] >= 0.75
    assert json.loads(json.dumps(out)) == out


# ------------------------------------------------------------------ sessions
def _files(tmp_path, seed=3):
    s = sim.synthetic_setting(3, n_candidates=6_000, n_correct=300, seed=seed)
    ids = np.array([f"x{i}" for i in range(len(s.truth))])
    paths = []
    for i in range(3):
        p = tmp_path / f"sys{i + 1}.csv"
        pd.DataFrame({"item": ids[s.G[:, i]]}).to_csv(p, index=False)
        paths.append(str(p))
    truth = dict(zip(ids, s.truth.astype(int)))
    found = tmp_path / "found.csv"
    pick = np.random.default_rng(0).choice(ids[s.truth], 80, replace=False)
    pd.DataFrame({"item": pick, "unit": [f"doc{k // 2}" for k in range(80)]}).to_csv(found, index=False)
    return s, paths, truth, str(found)


def _label_round(ev, tmp_path, truth, k=[0]):
    k[0] += 1
    out = tmp_path / f"tasks{k[0]}.csv"
    out.write_text("item,systems,label\nstale,sys1,\n")   # an older tasks file under the same name
    r = ev.next(str(out))
    if not r["tasks"]:   # nothing to verify: the file says so, no older task is sent again
        assert list(pd.read_csv(out).columns) == ["item", "systems", "label"] and len(pd.read_csv(out)) == 0
        with pytest.raises(EmptyInputError, match="no rows"):   # ingesting it by mistake: a clear no-op
            ev.ingest(str(out))
        return 0
    d = pd.read_csv(out)
    d["label"] = [truth[i] for i in d["item"]]
    lab = tmp_path / f"labels{k[0]}.csv"
    d.to_csv(lab, index=False)
    ev.ingest(str(lab))
    return r["tasks"]


@pytest.mark.parametrize("protocol", ["post-fill", "post", "joint"])
def test_session_three_systems_end_to_end(tmp_path, protocol):
    s, paths, truth, found = _files(tmp_path)
    db = str(tmp_path / "ev.db")
    bought = set()
    with OnDemand.create(db, epsilon=0.08, rounds=2, protocol=protocol) as ev:
        for i, p in enumerate(paths):
            r = ev.submit_file(f"sys{i + 1}", p)
            assert r["draws"] > 0 and "why" in r
            while _label_round(ev, tmp_path, truth):
                bought |= set(ev.store.rows("SELECT item FROM labels"))
        ev.add_exhaustive(found)
        st = ev.status()
    # every verification bought is counted, those of instances later found exhaustively too
    assert st["labels"]["verifications"] == len(bought) > 0
    assert all(r["awaiting_draws"] == 0 for r in st["systems"])
    head = {"post-fill": "post", "post": "post", "joint": "joint"}[protocol]
    assert st["estimator"] == head and st["config"]["protocol"] == protocol
    assert [r["name"] for r in st["systems"]] == ["sys1", "sys2", "sys3"]
    true = sim.truth_of(s)
    for i, row in enumerate(st["systems"]):
        assert row["covered"]
        # `next` tops up until the protocol's estimator is within ε (the draw cap is far away here)
        assert row["reached"] and row["precision"][head]["half_width"] <= 0.08
        for k, m in enumerate(("precision", "recall", "f1")):
            for kind in ("joint", "post"):               # both are unbiased under every protocol's draws
                iv = row[m][kind]
                assert abs(iv["estimate"] - true[k * 3 + i]) < 2.5 * iv["half_width"] + 0.02
        iv = row["precision"]["simple"]                  # own draws, importance weighted under post-fill
        assert abs(iv["estimate"] - true[i]) < 2.5 * iv["half_width"] + 0.02
        # the Wilson interval of the own draws' share needs draws from pᵢ: under post-fill only the
        # first system's proposal is pᵢ (no earlier draws to make up for)
        assert ("simple_wilson" in row["precision"]) == (protocol != "post-fill" or i == 0)
    assert len(st["pairs"]) == 3
    # reopening gives the same numbers (everything is in the file)
    with OnDemand.open(db) as ev:
        assert ev.status() == st
        if protocol == "post-fill":                      # the report, once (matplotlib is slow to start)
            from bayes_eval.ondemand_report import write_report

            files = write_report(ev, tmp_path / "report")
    if protocol == "post-fill":
        est = pd.read_csv(files[0])
        assert set(est["estimator"]) == {"joint", "post", "simple"} and len(est) == 3 * 3 * 3
        assert set(est.loc[est["headline"], "estimator"]) == {"post"}
        row = est[(est.system == "sys2") & (est.measure == "precision") & (est.estimator == "post")].iloc[0]
        assert abs(row["estimate"] - st["systems"][1]["precision"]["post"]["estimate"]) < 1e-12
        assert len(pd.read_csv(files[1])) == 3
        for png in files[2:]:
            with open(png, "rb") as fh:
                assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_system_awaiting_its_verifications_is_not_estimated_from_its_overlap(tmp_path):
    """A submitted system's first round is out for verification; the few of its draws already
    labeled are the instances earlier systems verified — not a random part of its draws — so
    its estimates wait for the round (from 7 such draws of 47 the simple precision read
    1.000 ± 0.000), and status says what it awaits; once the round is in, the estimate holds
    the truth."""
    s, paths, truth, _ = _files(tmp_path, seed=5)
    true = sim.truth_of(s)
    from bayes_eval.ondemand_report import write_report

    with OnDemand.create(str(tmp_path / "ev.db"), epsilon=0.08, rounds=2, protocol="post") as ev:
        ev.submit_file("sys1", paths[0])
        write_report(ev, tmp_path / "report0")   # nothing verified yet: every panel empty, said so
        while _label_round(ev, tmp_path, truth):
            pass
        ev.submit_file("sys2", paths[1])
        st = ev.status()
        b = st["systems"][1]
        assert b["draws"] > 0 and b["awaiting_draws"] == b["draws"] and b["labeled_draws"] == 0
        assert all(b[m][k] is None for m in ("precision", "recall", "f1") for k in ("joint", "post", "simple"))
        assert not b["reached"] and st["pairs"] == []
        import io

        from bayes_eval.ondemand_cli import print_status
        buf = io.StringIO()
        print_status(st, buf)
        assert f"awaiting verifications: sys2 {b['draws']} of {b['draws']} draws" in buf.getvalue()
        # the report says why a panel is empty (no legend warning, warnings are errors here)
        files = write_report(ev, tmp_path / "report")
        est = pd.read_csv(files[0])
        assert est.loc[est.system == "sys2", "estimate"].isna().all()
        _label_round(ev, tmp_path, truth)
        b = ev.status()["systems"][1]
    assert b["awaiting_draws"] == 0 and b["labeled_draws"] == b["draws"]
    iv = b["precision"]["post"]
    assert abs(iv["estimate"] - true[1]) < 2.5 * iv["half_width"] + 0.02


def test_session_post_fill_proposals_are_stored_and_drawn_from(tmp_path):
    """Under ``post-fill`` each system's proposal is fixed at submission and stored: a
    distribution on Xₘ, positive on all of it (≥ the defensive share of pₘ), constant on the
    post-strata of the systems submitted by then (so the post-stratified estimator stays
    unbiased), and it favours what earlier draws left under-sampled; the draws come from it."""
    s, paths, truth, _ = _files(tmp_path)
    db = str(tmp_path / "ev.db")
    with OnDemand.create(db, epsilon=0.08, rounds=2) as ev:
        assert ev.protocol == "post-fill"
        for i, p in enumerate(paths[:2]):
            ev.submit_file(f"sys{i + 1}", p)
            while _label_round(ev, tmp_path, truth):
                pass
        S = ev._state()
        q = dict(((sy, it), v) for sy, it, v in ev.store.rows("SELECT system, item, q FROM proposals"))
        draws = ev.store.rows("SELECT system, item FROM draws")
    sys2 = S["systems"][1][0]
    items2 = [it for (sy, it) in q if sy == sys2]
    q2 = np.array([q[(sys2, it)] for it in items2])
    assert len(items2) == S["systems"][1][2] and abs(q2.sum() - 1) < 1e-9
    assert np.all(q2 >= od.POST_FILL_DEFENSIVE / len(items2) - 1e-15)
    in1 = np.array([S["P"][S["index"][it], 0] > 0 for it in items2])
    assert np.ptp(q2[in1]) < 1e-12 and np.ptp(q2[~in1]) < 1e-12   # constant on the post-strata at submission
    assert q2[~in1][0] > q2[in1][0]          # the part sys1's draws did not reach is favoured
    assert all((sy, it) in q for sy, it in draws)                      # every draw from its system's support


def test_session_protocol_choice_and_old_files(tmp_path):
    """A file made before protocols existed (no ``protocol`` in its config) keeps 003's joint
    protocol; an unknown protocol is a clear error that creates nothing."""
    s, paths, truth, _ = _files(tmp_path)
    with pytest.raises(SessionError, match="unknown protocol"):
        OnDemand.create(str(tmp_path / "x.db"), protocol="bogus")
    assert not os.path.exists(tmp_path / "x.db")
    db = str(tmp_path / "old.db")
    with OnDemand.create(db, epsilon=0.1, protocol="joint") as ev:
        cfg = ev.store.meta()["config"]
        del cfg["protocol"]
        with ev.store.transaction() as conn:
            conn.execute("UPDATE meta SET value=? WHERE key='config'", (json.dumps(cfg),))
    with OnDemand.open(db) as ev:
        assert ev.protocol == "joint" and ev.estimator == "joint"
        ev.submit_file("A", paths[0])
        while _label_round(ev, tmp_path, truth):
            pass
        st = ev.status()
        assert st["estimator"] == "joint" and st["systems"][0]["reached"]
        assert ev.store.rows("SELECT COUNT(*) FROM proposals")[0][0] == 0


def test_session_bad_input_changes_nothing(tmp_path):
    s, paths, truth, found = _files(tmp_path)
    db = str(tmp_path / "ev.db")
    ev = OnDemand.create(db, epsilon=0.1)
    ev.submit_file("A", paths[0])
    out = tmp_path / "t.csv"
    ev.next(str(out))
    d = pd.read_csv(out)
    items = list(d["item"])
    before = ev.store.dump()

    def bad(rows, err, match):
        p = tmp_path / "bad.csv"
        p.write_text(rows)
        with pytest.raises(err, match=match):
            ev.ingest(str(p))
        assert ev.store.dump() == before

    bad(f"item,label\n{items[0]},1\n{items[1]},7\n", SessionError, "line 3")
    bad(f"item,label\n{items[0]},1\nnope,1\n", UnknownItemError, "nope")
    undrawn = next(i for i in pd.read_csv(paths[0])["item"] if i not in set(items))
    bad(f"item,label\n{undrawn},1\n", NotDrawnError, undrawn)
    bad(f"item,label\n{items[0]},1\n{items[0]},0\n", LabelConflictError, items[0])
    bad("item,label\n", EmptyInputError, "no rows")
    bad("itm,label\nx,1\n", MalformedInputError, "'item'")
    with pytest.raises(SessionError, match="already submitted"):
        ev.submit("A", ["a", "b"])
    with pytest.raises(MalformedInputError, match="twice"):
        ev.submit("B", ["a", "b", "a"])
    with pytest.raises(MalformedInputError, match="weight"):
        ev.submit("B", ["a", "b"], weights=[1, -1])
    assert ev.store.dump() == before
    # idempotent: the same submission and the same labels file again change nothing
    assert ev.submit_file("A", paths[0])["already"]
    d["label"] = [truth[i] for i in d["item"]]
    lab = tmp_path / "l.csv"
    d.to_csv(lab, index=False)
    assert ev.ingest(str(lab))["new"] == len(d)
    after = ev.store.dump()
    assert ev.ingest(str(lab))["already"]
    assert ev.store.dump() == after
    # a label conflicting with a stored one is refused
    flip = d.copy()
    flip.loc[0, "label"] = 1 - flip.loc[0, "label"]
    flip.to_csv(tmp_path / "flip.csv", index=False)
    with pytest.raises(LabelConflictError, match="stored earlier"):
        ev.ingest(str(tmp_path / "flip.csv"))
    assert ev.store.dump() == after
    ev.close()


_KILL = """
import sys, os, signal
from bayes_eval.ondemand_session import OnDemand
ev = OnDemand.open(sys.argv[1])
print(ev.ingest(sys.argv[2])["new"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_label_survives_a_killed_process(tmp_path):
    s, paths, truth, _ = _files(tmp_path)
    db = str(tmp_path / "ev.db")
    with OnDemand.create(db, epsilon=0.1) as ev:
        ev.submit_file("A", paths[0])
        ev.next(str(tmp_path / "t.csv"))
    d = pd.read_csv(tmp_path / "t.csv")
    d["label"] = [truth[i] for i in d["item"]]
    d.to_csv(tmp_path / "l.csv", index=False)
    r = subprocess.run([sys.executable, "-c", _KILL, db, str(tmp_path / "l.csv")], capture_output=True, text=True)
    assert r.returncode == -9 and int(r.stdout.strip()) == len(d)
    with OnDemand.open(db) as ev:
        assert len(ev.store.rows("SELECT * FROM labels")) == len(d)
        assert ev.store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_cli_verbs(tmp_path, capsys):
    """The ``ondemand`` verbs end to end: the installed ``bayes-eval`` entry point once (a
    process of its own), the rest in this process through ``cli.main`` (the same parser and
    exit codes, without a Python start-up per call)."""
    from types import SimpleNamespace

    from bayes_eval import cli

    s, paths, truth, found = _files(tmp_path)
    db = str(tmp_path / "ev.db")
    exe = [os.path.join(os.path.dirname(sys.executable), "bayes-eval")]
    r = subprocess.run(exe + ["ondemand", "new", db, "--protocol", "bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "--protocol" in r.stderr and not os.path.exists(db)

    def run(*a):
        capsys.readouterr()
        try:
            code = cli.main(["ondemand", *a])
        except SystemExit as e:  # argparse's usage errors
            code = e.code
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    r = run("new", db, "--protocol", "bogus")
    assert r.returncode == 2 and "--protocol" in r.stderr and not os.path.exists(db)
    assert run("new", db, "--epsilon", "0.1").returncode == 0
    r = run("submit", db, "A", paths[0])
    assert r.returncode == 0 and "new verifications needed now" in r.stdout
    r = run("submit", db, "A", paths[0])   # again, same predictions: nothing new is asked for
    assert r.returncode == 0 and "nothing changed, no new draws" in r.stdout and "needed now" not in r.stdout
    assert run("next", db, "--out", str(tmp_path / "t.json")).returncode == 0
    tasks = json.loads((tmp_path / "t.json").read_text())
    assert tasks and "item" in tasks[0]["data"]
    r = run("ingest", db, str(tmp_path / "nope.csv"))
    assert r.returncode == 2 and "not found" in r.stderr
    # a labels file with a row not labeled yet: the others are taken, and the blank one is said
    items = [t["data"]["item"] for t in tasks]
    lab = tmp_path / "part.csv"
    pd.DataFrame({"item": items, "label": [truth[i] for i in items[:-1]] + [None]}).to_csv(lab, index=False)
    r = run("ingest", db, str(lab))
    assert r.returncode == 0, r.stderr
    assert f"ingested {len(items) - 1} new verification(s)" in r.stdout
    assert "1 row(s) without one skipped, still to verify" in r.stdout
    # a Label Studio export of the rest, as a team labels it: two annotators disagree on one instance,
    # another is skipped by every annotator, labels are names (stop 81: no --resolve here before)
    rest = [t for t in tasks if t["data"]["item"] == items[-1]] + [t for t in tasks if t["data"]["item"] != items[-1]]

    def ann(aid, who, lab, cancelled=False):
        return {"id": aid, "completed_by": {"id": aid, "email": who}, "created_at": f"2026-01-0{aid}T00:00:00Z",
                "was_cancelled": cancelled, "ground_truth": False,
                "result": [] if cancelled else [{"from_name": "label", "to_name": "text", "type": "choices",
                                                 "value": {"choices": [["wrong", "correct"][lab]]}}]}
    y = truth[items[-1]]
    export = [{"id": 1, "data": rest[0]["data"], "annotations": [ann(1, "ann@x.org", y), ann(2, "bob@x.org", 1 - y)]}]
    if len(rest) > 1:
        export.append({"id": 2, "data": rest[1]["data"], "annotations": [ann(3, "ann@x.org", 0, cancelled=True)]})
    e = tmp_path / "export.json"
    e.write_text(json.dumps(export))
    r = run("ingest", db, str(e), "--label-map", "wrong=0,correct=1")
    assert r.returncode == 2 and "--resolve first or an annotator's email (ann@x.org, bob@x.org))" in r.stderr, r.stderr
    assert "stochastic" not in r.stderr      # the on-demand evaluation has no stochastic oracle to offer
    r = run("ingest", db, str(e), "--label-map", "wrong=0,correct=1", "--resolve", "first")
    assert r.returncode == 0, r.stderr
    assert "1 new verification(s)" in r.stdout and "1 disagreement(s) resolved by rule 'first'" in r.stdout
    ev = OnDemand.open(db)
    assert dict(ev.store.rows("SELECT item, label FROM labels"))[items[-1]] == y     # ann's, the first
    ev.close()
    if len(rest) > 1:   # the instance every annotator skipped (already verified from part.csv): not named
        assert "1 skipped/cancelled annotation(s) not ingested" in r.stdout and "every annotator" not in r.stdout
    assert run("ingest", db, str(e), "--resolve", " ").returncode == 2
    r = run("new", db)
    assert r.returncode == 2 and "already exists" in r.stderr
    r = run("status", db, "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["systems"][0]["name"] == "A"
    r = run("simulate", "synthetic", "--systems", "0")
    assert r.returncode == 2 and "--systems" in r.stderr
    r = run("simulate", "synthetic", "--protocols", "joint_post_fill_session,bogus")
    assert r.returncode == 2 and "bogus" in r.stderr
    r = run("simulate", "synthetic", "--systems", "2", "--repeats", "3", "--protocols", "joint_post_fill_session",
            "--format", "json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and set(out["cost"]) == {"simple", "joint", "joint_post_fill_session"}
    assert "joint_post_fill_session" in out["systems"][0]["precision"]
    # the session's protocol name (`ondemand new --protocol post-fill`, the default) runs the same protocol
    r = run("simulate", "synthetic", "--systems", "2", "--repeats", "3", "--protocols", "post-fill",
            "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["cost"] == out["cost"]
    from bayes_eval import ondemand_session, ondemand_sim    # every session protocol has its simulated twin
    assert set(ondemand_sim.SESSION_TWIN) == set(ondemand_session.PROTOCOLS)
    assert set(ondemand_sim.SESSION_TWIN.values()) <= set(ondemand_sim.PROTOCOLS)


@pytest.mark.slow
def test_coverage_and_bias_synthetic_ten_systems():
    """The issue's targets on the synthetic setting (10 systems, ε = 0.05, 500 repeats):
    joint 95% intervals for precision, recall and F1 cover 0.94–0.96 on average over the
    systems and ≥ 0.90 for each, and no precision bias beyond 3 Monte Carlo SE; both protocols
    reach ε on every system (the fair comparison: top-ups until the realized half-width is ≤ ε).
    (The cost target ≤ 0.5 × simple is not met: 0.68 measured with both reaching ε, and none of
    the alternatives in ``ondemand_sim.PROTOCOLS`` does better; benchmarks/results/ondemand.md.)"""
    s = sim.synthetic_setting(10, seed=0)
    out = sim.summarize(sim.simulate(s, 0.05, repeats=500, seed=0))
    # one system's precision (sys6, π = 0.27) covers 0.920 (3.1 binomial SE under 0.95): the
    # Wald interval of a low precision; every system ≥ 0.90, the mean over systems in 0.94–0.96
    for m in ("precision", "recall", "f1"):
        cov = np.array([row[m]["joint"]["coverage"] for row in out["systems"]])
        assert np.all(cov >= 0.90), (m, cov)
        assert 0.94 <= cov.mean() <= 0.96, (m, cov)
    for row in out["systems"]:
        p = row["precision"]["joint"]
        assert abs(p["bias"]) < 3 * p["bias_se"]
    assert out["cost"]["joint"] < 0.75 * out["cost"]["simple"]
    assert out["reached_at_submission"]["simple"] == 1.0 and out["reached_at_submission"]["joint"] >= 0.99


# ------------------------------------------------------------------ issue 17: proposals, fairness
def _cell_values(per_item, cell):
    """Per-cell values of a per-item array constant on cells (strata × items -> strata × cells)."""
    out = np.zeros((per_item.shape[0], cell.max() + 1))
    out[:, cell] = per_item
    return out


@pytest.mark.parametrize("rule", ["overlap", "balance"])
@pytest.mark.parametrize("n", [(2, 2), (3, 1), (1, 3)])
def test_joint_precision_unbiased_with_arbitrary_stratum_proposals(n, rule):
    """003's joint estimator generalized: stratum j drawn from any rⱼ (recorded), qᵢ = Σⱼ wᵢⱼ rⱼ
    with the proposals actually used — E[π̂ᵢ] = πᵢ exactly, summing over every sample, for 003's
    weights and the balance heuristic; and the pooled recall's proposal is the actual mixture."""
    cells, cell = od.cells_of(P)
    # stratum 0 favours instance 1, stratum 1 instances 3 and 4 (constant on the cell {3, 4})
    r_items = np.array([[.2, .6, .2, 0, 0], [0, .1, .1, .4, .4]])
    Rp = _cell_values(r_items, cell)
    truth = (P * F[:, None]).sum(0)
    E = np.zeros(2)
    total = 0.0
    U = P.shape[0]
    for combo in itertools.product(*[list(itertools.product(range(U), repeat=k)) for k in n]):
        prob = np.prod([np.prod(r_items[j, list(c)]) for j, c in enumerate(combo)])
        if prob == 0:
            continue
        items = np.array([x for c in combo for x in c])
        strata = np.array([j for j, c in enumerate(combo) for _ in c])
        T = od.tally(2, len(cells.size), strata, cell[items], F[items])
        pi, _, _ = od.joint_parts(cells, T, n, Rp=Rp, rule=rule)
        total += prob
        E += prob * pi
    assert total == pytest.approx(1.0)
    np.testing.assert_allclose(E, truth, rtol=0, atol=1e-12)
    # with rⱼ = pⱼ the generalized code is 003's estimator, bit for bit
    T = od.tally(2, len(cells.size), np.array([0, 0, 1]), cell[[0, 1, 3]], F[[0, 1, 3]])
    a = od.joint_parts(cells, T, (2, 1))
    b = od.joint_parts(cells, T, (2, 1), Rp=cells.P.T)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)


def test_top_up_and_round_size():
    np.testing.assert_array_equal(od.top_up([0.04, 0.06, 0.06], [100, 100, 399], 0.05, 400), [0, 44, 1])
    # sizing rounds: half the shortfall (003's rounds) or a given share, at least one, all of it last
    np.testing.assert_array_equal(od.round_size([100, 10, 3], [20, 10, 2], False), [40, 0, 1])
    np.testing.assert_array_equal(od.round_size([100, 10, 3], [20, 10, 2], False, frac=0.25), [20, 0, 1])
    np.testing.assert_array_equal(od.round_size([100, 10, 3], [20, 10, 2], True, frac=0.25), [80, 0, 1])


def test_simulation_cost_is_to_reach_epsilon_for_every_protocol():
    """Issue 17's fair comparison: every protocol is topped up until each new system's
    realized precision half-width is ≤ ε; the alternatives run and stay near 95% coverage."""
    s = sim.synthetic_setting(4, n_candidates=10_000, n_correct=600, seed=11)
    kinds = ("simple", "joint", "joint_post")
    out = sim.summarize(sim.simulate(s, epsilon=0.08, repeats=30, seed=0, protocols=kinds))
    for k in kinds:
        assert out["reached_at_submission"][k] == 1.0, k
        cov = np.mean([row["precision"][k]["coverage"] for row in out["systems"]])
        assert cov >= 0.85, (k, cov)
    assert out["reached"]["simple"] == 1.0 and out["reached"]["joint"] >= 0.95
    with pytest.raises(ValueError, match="unknown protocol"):
        sim.simulate(s, repeats=2, protocols=("nope",))


# ------------------------------------------------------------------ issue 17: post-stratified precision
def _assert_exact_and_conservative(samples, truth):
    """Over every sample (prob, π̂, Cov π̂): the probabilities sum to 1, E[π̂] = π exactly and
    E[v̂] ≥ Var π̂ (the variance estimate is conservative)."""
    m = len(truth)
    E, E2, EV, total = np.zeros(m), np.zeros(m), np.zeros(m), 0.0
    for prob, pi, cov in samples:
        total += prob
        E += prob * pi
        E2 += prob * pi ** 2
        EV += prob * np.diag(cov)
    assert total == pytest.approx(1.0)
    np.testing.assert_allclose(E, truth, rtol=0, atol=1e-12)
    assert np.all(EV >= E2 - E ** 2 - 1e-12), (EV, E2 - E ** 2)


def _post_enumerate(n, P=P, F=F):
    """Every sample of fixed sizes n with its probability and the post-stratified precision."""
    cells, cell = od.cells_of(P)
    for prob, T in _every_sample(P.T, n, cells, cell, F):
        pi, cov, _ = od.post_precision(cells, T, n)
        yield prob, pi, cov


@pytest.mark.parametrize("n", [(1, 1), (2, 2), (3, 1), (1, 3), (3, 2)])
def test_post_precision_unbiased_exact_enumeration(n):
    """The post-stratified estimator (our extension of 003 §"Estimating precision jointly"),
    exactly: E[π̂ᵢ] = πᵢ over every sample of fixed sizes — empty strata included, through the
    1/P(n_g ≥ 1) weight — and its variance estimate is conservative (E[v̂] ≥ Var π̂: the +½
    prior, on a universe where most strata hold one or two draws)."""
    _assert_exact_and_conservative(_post_enumerate(n), (P * F[:, None]).sum(0))


def test_post_strata_refine_when_a_system_arrives():
    """The strata of the systems submitted so far: merged cells before system m, split by
    membership in Xₘ after; sizes are kept; a stratum's pⱼ is that of its cells."""
    s = sim.synthetic_setting(4, n_candidates=8_000, n_correct=500, seed=1)
    cells, _ = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    sizes = []
    for m in range(4):
        ps = od.post_strata(cells, np.arange(4) <= m)
        assert ps.size.sum() == cells.size.sum()
        np.testing.assert_array_equal(ps.P[ps.group][:, :m + 1], cells.P[:, :m + 1])
        sizes.append(len(ps.size))
    assert sizes == sorted(sizes) and sizes[-1] == len(cells.size)
    # a system with no draws of its own is still estimated from the strata it splits
    T = np.zeros((4, len(cells.size), 2))
    T[0, :, 1] = cells.P[:, 0] > 0                           # one correct draw in every cell of X₁
    pi, _, ps = od.post_precision(cells, T, np.array([float(np.sum(cells.P[:, 0] > 0)), 0.0, 0.0, 0.0]))
    assert len(ps.size) == len(cells.size) and pi[1] > 0


def _post_mc(R, n, seed):
    s = sim.synthetic_setting(5, n_candidates=10_000, n_correct=600, seed=2)
    cells, cx = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    cell = np.full(len(s.truth), -1)
    cell[s.G.any(1)] = cx
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(s.G[:, j]) for j in range(5)]
    items = np.concatenate([members[j][rng.integers(0, len(members[j]), (R, n[j]))] for j in range(5)], axis=1)
    strata = np.repeat(np.arange(5), n)[None, :].repeat(R, 0)
    T = od.tally(5, len(cells.size), strata, cell[items], s.truth[items].astype(int))
    pi, cov, _ = od.post_precision(cells, T, n)
    return pi, np.diagonal(cov, axis1=1, axis2=2), sim.truth_of(s)[:5], cells


def test_post_precision_monte_carlo_bias_and_coverage():
    """10⁴ candidates, 5 systems, fixed n (some strata small, many post-strata with few or no
    draws): |mean error| < 4 Monte Carlo SE for every system; the 95% Wald intervals cover
    at least 0.95 − 4 binomial SE and at most 0.99 (the +½ prior is conservative where strata
    hold few draws: 0.988 measured for the system of 10 draws, 0.943–0.975 for the others); and the
    negative control — the same intervals at half width — under-covers (< 0.90 for every system:
    0.68–0.75 measured, 0.85 for the conservative 10-draw system; 0.68 for a normal estimate)."""
    R = 3000
    pi, var, truth, _ = _post_mc(R, np.array([60, 10, 40, 8, 25]), seed=5)
    err = pi - truth
    se = err.std(0, ddof=1) / np.sqrt(R)
    assert np.all(np.abs(err.mean(0)) < 4 * se), (err.mean(0), se)
    hw = od.Z95 * np.sqrt(var)
    cover = (np.abs(err) <= hw).mean(0)
    band = 4 * np.sqrt(0.95 * 0.05 / R)
    assert np.all((cover >= 0.95 - band) & (cover <= 0.99)), cover
    assert np.all((np.abs(err) <= hw / 2).mean(0) < 0.90)


def test_post_variance_bound_decreases_and_bisection_is_minimal():
    """The sizing bound of the post-stratified estimator falls in nₘ, the bisection returns
    the smallest nₘ reaching ε, and (f̃ = ½ everywhere) it asks for fewer draws than the
    simple estimator's z²/(4ε²) when earlier systems overlap Xₘ."""
    s = sim.synthetic_setting(4, n_candidates=8_000, n_correct=500, seed=1)
    cells, _ = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    fill = np.full(len(cells.size), 0.5)
    base = np.array([200.0, 150.0, 0.0, 0.0])
    V = [od.post_variance_bound(cells, base + [0, 0, k, 0], 2, fill) for k in range(1, 400, 7)]
    assert np.all(np.diff(V) <= 1e-15)
    k = int(od.post_required_draws(cells, base, 2, fill, 0.05, 5000))
    hw = lambda k: od.Z95 * np.sqrt(od.post_variance_bound(cells, base + [0, 0, k, 0], 2, fill))  # noqa: E731
    assert hw(k) <= 0.05 < hw(k - 1)
    assert k < int(np.ceil(od.Z95 ** 2 / (4 * 0.05 ** 2)))
    assert od.post_variance_bound(cells, base, 2, fill) == np.inf     # Xₘ reached by no draw
    # the bound (true rates as fill) is close to the realized variance at fixed n
    n = np.array([60, 10, 40, 8, 25])
    pi, var, truth, cells5 = _post_mc(2000, n, seed=7)
    s5 = sim.synthetic_setting(5, n_candidates=10_000, n_correct=600, seed=2)
    X = s5.G.any(1)
    _, cx = od.cells_of(s5.G[X] / s5.G.sum(0))
    rc = np.bincount(cx, weights=s5.truth[X], minlength=len(cells5.size)) / cells5.size
    for m in range(5):
        ratio = od.post_variance_bound(cells5, n.astype(float), m, rc) / pi[:, m].var()
        assert 0.8 < ratio < 1.6, (m, ratio)


# ------------------------------------------------------------------ issue 17: post-stratified, per-stratum proposals
# X₀ = {0, 1, 2}, X₁ = {1, 2, 3}, X₂ = {2, 3, 4} (uniform pᵢ); stratum 1 favours X₀ ∩ X₁ with a
# proposal constant on the post-strata of systems {0, 1} — {1, 2} is one of them until X₂ splits it
F3 = np.array([1, 0, 1, 1, 0])
G3 = np.array([[1, 0, 0], [1, 1, 0], [1, 1, 1], [0, 1, 1], [0, 0, 1]], dtype=float)
P3 = G3 / G3.sum(0)
R3 = np.array([P3[:, 0], [0, .4, .4, .2, 0], [0, 0, .25, .5, .25]])   # r₀ = p₀, r₁, r₂ (per instance)


@pytest.mark.parametrize("n", [(1, 2, 1), (2, 2, 1), (1, 1, 2)])
def test_post_precision_unbiased_with_stratum_proposals_exact_enumeration(n):
    """The post-stratified estimator with strata drawn from proposals constant on the post-strata
    of the systems submitted before them (our extension of 003 §"Joint estimator"; P(n_g ≥ 1)
    from the proposals' masses on g): E[π̂ᵢ] = πᵢ exactly over every sample of fixed sizes,
    although system 2 splits the stratum stratum 1 favoured, and the variance estimate is
    conservative; post_parts' pooled recall uses the same proposals."""
    cells, cell = od.cells_of(P3)
    Rp = _cell_values(R3, cell)
    tallies = []

    def samples():
        for prob, T in _every_sample(R3, n, cells, cell, F3):
            tallies.append(T)
            pi, cov, _ = od.post_precision(cells, T, n, Rp=Rp)
            yield prob, pi, cov

    _assert_exact_and_conservative(samples(), (P3 * F3[:, None]).sum(0))
    T = tallies[-1]
    # the same tallies read as uniform draws would be biased: the proposals matter
    pi_p, _, _ = od.post_precision(cells, T, n)
    pi_r, _, _ = od.post_precision(cells, T, n, Rp=Rp)
    assert not np.allclose(pi_p, pi_r)
    # post_parts passes the proposals on (its precision is post_precision's, ν̂'s q₀ their mixture)
    pp = od.post_parts(cells, T, n, Rp=Rp)
    np.testing.assert_allclose(pp[0], pi_r)
    np.testing.assert_allclose(pp[1], od.pooled_recall_influence(cells, T, n, Rp)[0])


def test_post_precision_proposals_must_be_constant_on_post_strata():
    """A proposal that is not constant on a post-stratum is refused (a draw in it would not be
    uniform there); rⱼ = pⱼ is the uniform estimator bit for bit."""
    cells, cell = od.cells_of(P3)
    T = od.tally(3, len(cells.size), np.array([0, 1, 2]), cell[[0, 1, 3]], F3[[0, 1, 3]])
    n = np.array([1.0, 1.0, 1.0])
    a = od.post_precision(cells, T, n)
    b = od.post_precision(cells, T, n, Rp=cells.P.T)
    for x, y in zip(a[:2], b[:2]):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
    bad = _cell_values(np.array([P3[:, 0], [0, .3, .5, .2, 0], R3[2]]), cell)   # splits {1, 2} unevenly
    T2 = od.tally(3, len(cells.size), np.array([0, 1]), cell[[0, 1]], F3[[0, 1]])
    with pytest.raises(ValueError, match="not constant"):         # {1, 2}: one post-stratum of {0, 1}
        od.post_precision(cells, T2, np.array([1.0, 1.0, 0.0]), active=[True, True, False], Rp=bad)
    od.post_precision(cells, T, n, Rp=bad)                        # X₂ splits it: constant on the cells


def test_post_fill_tops_up_undersampled_post_strata_and_sizing_is_minimal():
    """post_fill is a distribution constant on the post-strata of the active systems, gives no
    draws to the post-strata earlier strata already sample at the water level, and water-fills
    the rest towards N_g (proportional) or N_g σ_g (Neyman); post_required_draws with the
    proposal depending on nₘ returns the smallest nₘ reaching ε under that proposal."""
    s = sim.synthetic_setting(4, n_candidates=8_000, n_correct=500, seed=1)
    cells, _ = od.cells_of(s.G[s.G.any(1)] / s.G.sum(0))
    n = np.array([120.0, 80.0, 0.0, 0.0])
    Rp = cells.P.T.copy()
    D_prev = n @ Rp
    act = np.arange(4) <= 2
    ps = od.post_strata(cells, act)
    r = od.post_fill(cells, D_prev, 2, 60.0, act)
    assert (cells.size * r).sum() == pytest.approx(1.0)
    assert np.all(r[cells.P[:, 2] == 0] == 0)
    g_mean = (od._to_strata(cells.size * r, ps) / ps.size)[ps.group]
    np.testing.assert_allclose(r, g_mean, rtol=1e-12)
    lam_prev = od._to_strata(cells.size * D_prev, ps)
    x = 60.0 * od._to_strata(cells.size * r, ps)
    inm = ps.P[:, 2] > 0
    level = (lam_prev + x)[inm & (x > 0)] / ps.size[inm & (x > 0)]
    assert np.ptp(level) < 1e-6 * level.max()                 # the filled strata reach one level
    assert np.all(lam_prev[inm & (x == 0)] / ps.size[inm & (x == 0)] >= level.max() - 1e-9)
    fill = np.full(len(cells.size), 0.5)
    fp = lambda k: od.post_fill(cells, D_prev, 2, np.maximum(k, 1), act)   # noqa: E731
    k = int(od.post_required_draws(cells, n, 2, fill, 0.08, 5000, act, Rp=Rp, fill_prop=fp))

    def hw(k):
        R = Rp.copy()
        R[2] = fp(k)
        return od.Z95 * np.sqrt(od.post_variance_bound(cells, n + [0, 0, k, 0], 2, fill, act, R))
    assert hw(k) <= 0.08 < hw(k - 1)
    # the filled proposal needs fewer draws than pₘ for the same bound
    assert k < int(od.post_required_draws(cells, n, 2, fill, 0.08, 5000, act))


def test_simulation_post_fill_protocols_reach_epsilon_and_cover():
    """joint_post_fill (post-stratified precision, each system drawn from post_fill) reaches ε at
    every submission and covers near 95%; the session's protocol (earlier systems topped up after
    each submission, as `next` does) reaches ε for every system at the end too, its extra draws
    counted in the cost (our extension, issue 17)."""
    s = sim.synthetic_setting(4, n_candidates=10_000, n_correct=600, seed=11)
    kinds = ("simple", "joint", "joint_post_fill", "joint_post_fill_session")
    out = sim.summarize(sim.simulate(s, epsilon=0.08, repeats=30, seed=0, protocols=kinds))
    for k in kinds[2:]:
        assert out["reached_at_submission"][k] == 1.0, k
        cov = np.mean([row["precision"][k]["coverage"] for row in out["systems"]])
        assert cov >= 0.85, (k, cov)
    # (costs are not compared here: the post-fill protocols draw their own random streams)
    assert out["reached"]["joint_post_fill_session"] == 1.0


def _session_run(tmp_path, protocol, seed, s, ids, paths, unverifiable=frozenset(), sent=None, keep=False):
    """One scripted session on the setting ``s`` (annotators answer from the truth, and skip the
    ``unverifiable`` instances: ``ondemand skip``); ``sent`` collects the instances sent for verification;
    ``keep``: the file stays, ``tmp_path / f"{protocol}{seed}.db"``."""
    truth = dict(zip(ids, s.truth.astype(int)))
    db = str(tmp_path / f"{protocol}{seed}.db")
    with OnDemand.create(db, epsilon=0.08, rounds=2, protocol=protocol, seed=seed) as ev:
        for i, p in enumerate(paths):
            ev.submit_file(f"sys{i + 1}", p)
            while True:
                r = ev.next()
                if not r["tasks"]:
                    break
                if sent is not None:
                    sent += r["items"]
                lab = [x for x in r["items"] if x not in unverifiable]
                if lab:
                    ev.add_labels(lab, [truth[x] for x in lab])
                if len(lab) < len(r["items"]):
                    nobody = [x for x in r["items"] if x in unverifiable]
                    assert ev.skip(nobody)["new"] == len(nobody)
        st = ev.status()
    if not keep:
        os.remove(db)
    return st


@pytest.mark.slow
def test_session_protocols_cover_and_are_unbiased_over_repeats(tmp_path):
    """The session itself (not the simulation): 120 scripted sessions of three systems on one
    synthetic universe per protocol, each with its own draw seed.  Under both ``post-fill``
    and ``joint`` the headline precision intervals cover within the binomial band of 0.95 (and
    a half-width negative control falls below it), each system's mean error is within 3 Monte
    Carlo SE, every system ends within ε; and post-fill buys fewer new verifications than
    003's protocol on the same seeds (at 600 sessions: 0.93–0.95 coverage, |z| ≤ 2.6, 286
    against 343 draws)."""
    s = sim.synthetic_setting(3, n_candidates=6_000, n_correct=300, seed=3)
    ids = np.array([f"x{i}" for i in range(len(s.truth))])
    paths = []
    for i in range(3):
        p = tmp_path / f"sys{i + 1}.csv"
        pd.DataFrame({"item": ids[s.G[:, i]]}).to_csv(p, index=False)
        paths.append(str(p))
    true = sim.truth_of(s)[:3]
    R = 120
    cost = {}
    for protocol in ("post-fill", "joint"):
        est, hw, cost[protocol] = np.zeros((R, 3)), np.zeros((R, 3)), np.zeros(R)
        for r in range(R):
            st = _session_run(tmp_path, protocol, r, s, ids, paths)
            head = st["estimator"]
            for i, row in enumerate(st["systems"]):
                assert row["reached"]
                est[r, i] = row["precision"][head]["estimate"]
                hw[r, i] = row["precision"][head]["half_width"]
            cost[protocol][r] = st["cost"]["verify"]
        cover = (np.abs(est - true) <= hw).mean(0)
        band = 3 * np.sqrt(0.95 * 0.05 / R)
        assert np.all(cover >= 0.95 - band - 0.02), (protocol, cover)
        half = (np.abs(est - true) <= hw / 2).mean(0)
        assert np.all(half < 0.95 - band), (protocol, half)   # the negative control must fail
        z = (est.mean(0) - true) / (est.std(0, ddof=1) / np.sqrt(R))
        assert np.all(np.abs(z) < 3), (protocol, z)
    diff = cost["joint"] - cost["post-fill"]
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(R), (cost["joint"].mean(), cost["post-fill"].mean())


def test_pooled_recall_interval_sees_correct_instances_the_draws_missed():
    """Issue 17 (measured on abt-buy): when Xₐ holds all but one of the pool's correct instances
    and the draws miss that one, 003's ν̂ₐ is exactly 1 with linearized variance exactly 0, so its
    interval cannot cover ν = 39/40.  post_parts keeps 003's ν̂ but takes the larger of that variance
    and the post-strata's (a post-stratum outside Xₐ whose draws were all incorrect keeps a variance):
    over 2,000 repeats its interval covers within the binomial band of ≥ 95%, and 003's alone
    (the negative control) misses most of the time."""
    U = 120
    F = np.zeros(U, dtype=np.int64)
    F[:40] = 1
    G = np.zeros((U, 3), dtype=bool)
    G[:39, 0] = True                       # A: 39 of the 40 correct instances
    G[40:60, 0] = True                     #    and 20 incorrect
    G[[39] + list(range(29, 39)) + list(range(60, 90)), 1] = True    # B: the 40th, 10 of A's, 30 incorrect
    G[list(range(5)) + list(range(90, 115)), 2] = True                # C: 5 of A's, 25 incorrect
    keep = G.any(1)
    G, F = G[keep], F[keep]
    cells, cell = od.cells_of(G / G.sum(0))
    n = np.array([60, 15, 15])
    rng = np.random.default_rng(5)
    R = 2000
    members = [np.flatnonzero(G[:, j]) for j in range(3)]
    items = np.concatenate([members[j][rng.integers(0, len(members[j]), (R, n[j]))] for j in range(3)], 1)
    strata = np.broadcast_to(np.repeat(np.arange(3), n), items.shape)
    T = od.tally(3, len(cells.size), strata, cell[items], F[items])
    nu_true = (G & (F == 1)[:, None]).sum(0) / F.sum()
    post = od.post_parts(cells, T, n)
    joint = od.joint_parts(cells, T, n)
    np.testing.assert_allclose(post[1], joint[1], rtol=1e-12)          # the same point estimate
    M = 3
    var_post = np.diagonal(post[2], axis1=-2, axis2=-1)[:, M:]
    var_003 = np.diagonal(joint[2], axis1=-2, axis2=-1)[:, M:]
    assert np.all(var_post >= var_003 - 1e-15)
    missed = post[1][:, 0] > 1 - 1e-12
    assert missed.mean() > 0.5 and np.all(var_003[missed, 0] < 1e-20) and np.all(var_post[missed, 0] > 0)
    cover_post = np.abs(post[1][:, 0] - nu_true[0]) <= od.Z95 * np.sqrt(var_post[:, 0])
    cover_003 = np.abs(joint[1][:, 0] - nu_true[0]) <= od.Z95 * np.sqrt(var_003[:, 0])
    assert cover_post.mean() >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / R)
    assert cover_003.mean() < 0.6
    # the precision block is post_precision's, unchanged
    np.testing.assert_allclose(post[2][:, :M, :M], od.post_precision(cells, T, n)[1], rtol=1e-12)


def test_a_systems_file_as_users_save_it(tmp_path):
    """A submitted system's instances read alike from CSV, a ;-separated CSV with decimal-comma
    weights, JSON lines, a JSON list and Parquet (a JSON lines file read as CSV gave 299 ids
    like '{"item":"d1"}', sharing nothing with the same system as CSV); a spreadsheet is refused."""
    from bayes_eval.errors import MalformedInputError
    from bayes_eval.ondemand_session import read_system_file

    frame = pd.DataFrame({"item": [f"d{i:04d}" for i in range(40)], "weight": np.linspace(0.5, 2.0, 40)})
    frame.to_csv(tmp_path / "s.csv", index=False)
    frame.to_csv(tmp_path / "semi.csv", sep=";", decimal=",", index=False)
    frame.to_json(tmp_path / "s.jsonl", orient="records", lines=True, double_precision=15)
    frame.to_json(tmp_path / "s.json", orient="records", double_precision=15)
    frame.to_parquet(tmp_path / "s.parquet", index=False)
    for name in ("s.csv", "semi.csv", "s.jsonl", "s.json", "s.parquet"):
        items, weights, _, _ = read_system_file(str(tmp_path / name))
        assert items == list(frame["item"]), name
        np.testing.assert_allclose(weights, frame["weight"], rtol=1e-12, err_msg=name)
    (tmp_path / "s.xlsx").write_bytes(b"PK")
    with pytest.raises(MalformedInputError, match="a spreadsheet"):
        read_system_file(str(tmp_path / "s.xlsx"))


def _weighted_files(tmp_path, s, ids, which=(0, 1, 2)):
    """The systems of setting ``s`` as files, those in ``which`` with a weight column
    (uniform in [0.5, 1.5], fixed seed); returns the paths and each system's true weighted
    precision Σ pᵢ f."""
    rng = np.random.default_rng(11)
    paths, true = [], []
    for i in range(3):
        its = ids[s.G[:, i]]
        w = rng.uniform(0.5, 1.5, len(its)) if i in which else np.ones(len(its))
        p = tmp_path / f"w{i + 1}.csv"
        pd.DataFrame({"item": its, "weight": w}).to_csv(p, index=False)
        paths.append(str(p))
        true.append(float((w * s.truth[s.G[:, i]]).sum() / w.sum()))
    return paths, np.array(true)


def test_a_weighted_system_makes_the_joint_estimator_lead(tmp_path):
    """Post-strata are the cells of equal pⱼ(x), so a system with a weight column splits them
    into strata of an instance or two each, and the post-stratified estimator's intervals grew
    wide (coverage 1.00) for 26% more verifications than 003's joint protocol.  Once a system is
    weighted the session leads with the joint estimator, draws the later systems from their own
    p (the stored proposal is pₘ), and says so in ``status``; before that it is post-fill's."""
    s = sim.synthetic_setting(3, n_candidates=6_000, n_correct=300, seed=3)
    ids = np.array([f"x{i}" for i in range(len(s.truth))])
    paths, _ = _weighted_files(tmp_path, s, ids, which=(1,))
    truth = dict(zip(ids, s.truth.astype(int)))
    db = str(tmp_path / "ev.db")
    with OnDemand.create(db, epsilon=0.08, rounds=2) as ev:
        ev.submit_file("sys1", paths[0])
        while _label_round(ev, tmp_path, truth):
            pass
        st = ev.status()
        assert st["estimator"] == "post" and st["weighted_systems"] == []
        ev.submit_file("sys2", paths[1])
        q = dict(ev.store.rows("SELECT item, q FROM proposals WHERE system=2"))
        p = dict(ev.store.rows("SELECT item, p FROM predictions WHERE system=2"))
        assert set(q) == set(p) and max(abs(q[it] - p[it]) for it in p) < 1e-15   # drawn from its own p
        assert np.ptp(list(p.values())) > 0
        st = ev.status()       # sys2's draws are committed, not labeled: the cost says so
        pend = sum(d[4] for d in ev._state()["draws"] if d[1] == 2)
        assert pend > 0 and st["labels"]["verifications"] == st["systems"][0]["new_verifications"]
        assert abs(st["cost"]["awaiting"] - 0.18 * pend) < 1e-9
        from bayes_eval.ondemand_cli import print_status
        import io
        buf = io.StringIO()
        print_status(st, buf)
        assert f"of it for {pend} verifications awaited" in buf.getvalue()
        assert "recall and F1 need an exhaustive sample" in buf.getvalue()
        while _label_round(ev, tmp_path, truth):
            pass
        st = ev.status()
    assert st["estimator"] == "joint" and st["weighted_systems"] == ["sys2"]
    assert all(r["reached"] for r in st["systems"]), [r["precision"]["joint"] for r in st["systems"]]
    buf = io.StringIO()
    print_status(st, buf)
    assert st["cost"]["awaiting"] == 0 and "awaited" not in buf.getvalue()
    assert "003's joint estimator, not protocol post-fill's post-stratified one: sys2 weighted" in buf.getvalue()
    assert "precision (joint)" in buf.getvalue()


def test_weighted_systems_cover_and_cost_no_more_than_003s_protocol(tmp_path):
    """60 scripted sessions of three weighted systems: post-fill's headline intervals cover the
    weighted precision Σ pᵢ f within the binomial band of 0.95 (a half-width interval does not),
    and post-fill buys no more verifications than 003's joint protocol on the same seeds (244
    against 211 before the joint estimator led for weighted systems; README, "Weighted systems")."""
    s = sim.synthetic_setting(3, n_candidates=6_000, n_correct=300, seed=3)
    ids = np.array([f"x{i}" for i in range(len(s.truth))])
    paths, true = _weighted_files(tmp_path, s, ids)
    R = 60
    cost = {}
    for protocol in ("post-fill", "joint"):
        est, hw, cost[protocol] = np.zeros((R, 3)), np.zeros((R, 3)), np.zeros(R)
        for r in range(R):
            st = _session_run(tmp_path, protocol, r, s, ids, paths)
            assert st["estimator"] == "joint"
            for i, row in enumerate(st["systems"]):
                est[r, i] = row["precision"]["joint"]["estimate"]
                hw[r, i] = row["precision"]["joint"]["half_width"]
            cost[protocol][r] = st["labels"]["verifications"]
        band = 3 * np.sqrt(0.95 * 0.05 / (3 * R))
        cover = (np.abs(est - true) <= hw).mean()
        assert 0.95 - band - 0.02 <= cover, (protocol, cover)
        assert (np.abs(est - true) <= hw / 2).mean() < 0.95 - band, protocol
    assert cost["post-fill"].mean() <= 1.02 * cost["joint"].mean(), (cost["post-fill"].mean(), cost["joint"].mean())


def test_status_table_keeps_its_columns_for_long_system_names():
    """A system name longer than the name column (12) widens it: the draws of every row end
    under the header's ``draws``."""
    import io

    from bayes_eval.ondemand_cli import print_status

    st = {"config": {"epsilon": 0.05, "cost_verify": 0.18, "protocol": "post-fill"}, "estimator": "post",
          "labels": {"verifications": 0, "exhaustive": 0}, "n_units": 0, "cost": {"total": 0.0},
          "systems": [{"name": "baseline-v2-large-2026", "draws": 49, "new_verifications": 49, "cost": 8.82},
                      {"name": "B", "draws": 125, "new_verifications": 21, "cost": 3.78}]}
    buf = io.StringIO()
    print_status(st, buf)
    lines = buf.getvalue().splitlines()
    end = lines[1].index("draws") + len("draws")
    assert lines[2][:end].endswith(" 49") and lines[3][:end].endswith("125"), lines


def _domain_mc(R, n, seed):
    """R samples of fixed sizes ``n`` from the synthetic universe of 5 systems where some instances
    cannot be verified (30% of system 0's correct ones, 5% of the rest): the draws' tallies of the
    verified (T) and of the skipped (U), the cells, the precision on the verifiable instances and on all."""
    s = sim.synthetic_setting(5, n_candidates=10_000, n_correct=600, seed=2)
    inpool = s.G.any(1)
    rng = np.random.default_rng(seed)
    unv = inpool & (rng.random(len(s.truth)) < np.where(s.G[:, 0] & s.truth.astype(bool), 0.3, 0.05))
    cells, cx = od.cells_of(s.G[inpool] / s.G.sum(0))
    cell = np.full(len(s.truth), -1)
    cell[inpool] = cx
    D = inpool & ~unv
    truth_d = np.array([s.truth[D & s.G[:, j]].mean() for j in range(5)])
    members = [np.flatnonzero(s.G[:, j]) for j in range(5)]
    items = np.concatenate([members[j][rng.integers(0, len(members[j]), (R, n[j]))] for j in range(5)], axis=1)
    strata = np.repeat(np.arange(5), n)[None, :].repeat(R, 0)
    lab, skip = s.truth[items].astype(int), unv[items]
    T = od.tally(5, len(cells.size), strata, cell[items], lab, mask=~skip)
    U = od.tally(5, len(cells.size), strata, cell[items], np.zeros_like(lab), mask=skip)[..., 0]
    return cells, T, U, truth_d, sim.truth_of(s)[:5]


def test_precision_on_the_verifiable_instances_when_some_cannot_be_verified():
    """Instances nobody can verify (``ondemand skip``): every precision estimator (003's joint and
    simple, the post-stratified) estimates the precision on the verifiable instances D -- π̂ = N̂/(1 − Û)
    (:func:`bayes_eval.ondemand_domain.domain_precision`) -- with |mean error| < 4 Monte Carlo SE, a
    delta-method variance within 15% of the spread (the post-stratified one at least it: conservative
    where strata hold few draws, as without skips), 95% intervals covering as they do without an
    unverifiable instance (the Wald intervals of the 8- and 10-draw systems under-cover alike: 0.87-0.91
    measured, 0.90-0.92 without skips), and the skips' absence reproducing the plain estimators
    exactly.  Negative control: the plain estimators on the same draws (skipped draws dropped, still
    counted in n) miss π_D (joint 0.75 coverage for system 0, whose correct instances are the skipped)."""
    R, n = 2000, np.array([60, 10, 40, 8, 25])
    cells, T, U, truth_d, truth = _domain_mc(R, n, seed=7)
    assert np.all(truth - truth_d > 0.02)        # the skips matter: D's precision is lower
    rows = {"joint": lambda sk: od.joint_parts(cells, T, n, skipped=sk)[::2],
            "post": lambda sk: od.post_parts(cells, T, n, skipped=sk)[::2],
            "simple": lambda sk: (lambda e: (e.value[..., :5], e.cov[..., :5, :5]))(
                od.simple_estimates(cells, T, n, np.zeros((R, 5)), np.zeros((R, 5, 5)), skipped=sk))}
    band = 4 * np.sqrt(0.95 * 0.05 / R)
    for name, fn in rows.items():
        pi, cov = fn(U)
        pi, var = pi[:, :5], np.maximum(np.diagonal(cov, axis1=-2, axis2=-1)[:, :5], 0.0)
        err = pi - truth_d
        se = err.std(0, ddof=1) / np.sqrt(R)
        assert np.all(np.abs(err.mean(0)) < 4 * se), (name, err.mean(0), se)
        ratio = var.mean(0) / err.var(0)
        assert np.all(ratio > 0.85) and (name == "post" or np.all(ratio < 1.15)), (name, ratio)
        cover = (np.abs(err) <= od.Z95 * np.sqrt(var)).mean(0)
        big = n >= 25
        assert np.all(cover[big] >= 0.95 - band) and np.all(cover >= 0.85), (name, cover)
        # the negative control: dropping the skipped draws without the ratio misses D's precision
        pi0, cov0 = fn(None)
        if name != "post":   # the post-stratified rates already drop them; only its weights are off
            miss = (np.abs(pi0[:, 0] - truth_d[0]) > od.Z95 * np.sqrt(np.maximum(cov0[:, 0, 0], 0))).mean()
            assert miss > 0.15, (name, miss)
    # no skipped draw: every number is the plain estimator's
    for f in (lambda sk: od.joint_parts(cells, T, n, skipped=sk),
              lambda sk: od.post_parts(cells, T, n, skipped=sk),
              lambda sk: tuple(od.simple_estimates(cells, T, n, np.zeros((R, 5)), np.zeros((R, 5, 5)), skipped=sk))):
        for a, b in zip(f(None), f(np.zeros_like(U))):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def _unverifiable(paths, truth):
    """The instances of :func:`_files`' universe nobody can verify (20% of the first system's correct
    ones, 3% of the rest) and each system's precision on the others."""
    ids = np.array(list(truth))
    rng = np.random.default_rng(11)
    on1 = np.isin(ids, pd.read_csv(paths[0])["item"])
    correct = np.array([truth[i] for i in ids]) == 1
    unv = set(ids[rng.random(len(ids)) < np.where(on1 & correct, 0.2, 0.03)])
    return unv, np.array([np.mean([truth[i] for i in set(pd.read_csv(p)["item"]) - unv]) for p in paths])


def test_a_session_skips_instances_nobody_can_verify(tmp_path, capsys):
    """``ondemand skip``: instances no annotator can verify (here 20% of the first system's correct
    instances and 3% of the rest) are recorded once, never sent again, and the rounds that drew them
    enter the estimates; the estimates then describe the instances that can be verified -- each system's
    precision interval holds its precision there (within 2.5 half-widths + 0.02; the pool's own precision,
    0.06 higher for the first system, is not the target).  Refused, with nothing written: a label for a
    skipped instance, skipping a verified, unknown or undrawn instance, exhaustive annotation that finds a
    skipped one.  The CLI verb, the status line and the ingest line's hint; reopening gives the same numbers."""
    from bayes_eval import cli

    s, paths, truth, found = _files(tmp_path)
    unv, prec_d = _unverifiable(paths, truth)
    assert prec_d[0] < sim.truth_of(s)[0] - 0.04
    sent = []
    st0 = _session_run(tmp_path, "post-fill", 0, s, np.array(list(truth)), paths, unv, sent, keep=True)
    db, skipped = str(tmp_path / "post-fill0.db"), set(sent) & unv
    with OnDemand.open(db) as ev:
        assert ev.status() == st0
        assert len(sent) == len(set(sent)) and skipped      # a skipped instance is never sent again
        assert ev.skip(sorted(skipped)[:2]) == {"new": 0, "already": 2, "skipped": len(skipped)}
        before = ev.store.dump()
        one = sorted(skipped)[0]
        verified = ev.store.rows("SELECT item FROM labels")[0][0]
        never = next(x for x in pd.read_csv(paths[0])["item"] if x not in set(sent))
        for bad, err, msg in [(lambda: ev.add_labels([one], [1]), LabelConflictError, "beyond any annotator"),
                              (lambda: ev.skip([verified]), LabelConflictError, "already verified"),
                              (lambda: ev.skip(["nope"]), UnknownItemError, "not predicted"),
                              (lambda: ev.skip([never]), NotDrawnError, "never drawn"),
                              (lambda: ev.skip([]), EmptyInputError, "no instance")]:
            with pytest.raises(err, match=msg):
                bad()
        ex = tmp_path / "found_skipped.csv"
        pd.DataFrame({"item": [one], "unit": ["docX"]}).to_csv(ex, index=False)
        with pytest.raises(LabelConflictError, match="exhaustive annotation found it"):
            ev.add_exhaustive(str(ex))
        assert ev.store.dump() == before
        st = ev.status()
    assert st["skipped"] == len(skipped) and st["cost"]["awaiting"] == 0
    for i, row in enumerate(st["systems"]):
        assert row["awaiting_draws"] == 0 and row["reached"]
        iv = row["precision"]["post"]
        assert abs(iv["estimate"] - prec_d[i]) < 2.5 * iv["half_width"] + 0.02, (i, iv, prec_d[i])
    assert st["systems"][0]["skipped_draws"] > 0
    assert cli.main(["ondemand", "status", db]) == 0
    assert f"{len(skipped)} instances recorded as beyond any annotator" in capsys.readouterr().out
    assert cli.main(["ondemand", "report", db, "--out", str(tmp_path / "rep")]) == 0     # the CSV says it too
    rep = pd.read_csv(tmp_path / "rep" / "estimates.csv").drop_duplicates("system").set_index("system")
    assert [rep.loc[r["name"], "skipped_draws"] for r in st["systems"]] == [r.get("skipped_draws", 0)
                                                                            for r in st["systems"]]
    # the verb: a drawn instance awaiting its verification, then one no system predicts
    db2 = str(tmp_path / "ev2.db")
    with OnDemand.create(db2, epsilon=0.08, rounds=2) as ev:
        ev.submit_file("sys1", paths[0])
        item, other = ev.next()["items"][:2]
    # a Label Studio export where every annotator skipped the instance: the ingest line names the command
    e = tmp_path / "export.json"
    e.write_text(json.dumps([{"id": 1, "data": {"item": item}, "annotations": [
        {"id": 1, "completed_by": {"id": 1, "email": "ann@x.org"}, "was_cancelled": True, "result": []}]},
        {"id": 2, "data": {"item": other}, "annotations": [
            {"id": 2, "completed_by": {"id": 1, "email": "ann@x.org"}, "was_cancelled": False,
             "result": [{"from_name": "label", "to_name": "text", "type": "choices", "value": {"choices": ["1"]}}]}]}]))
    capsys.readouterr()
    assert cli.main(["ondemand", "ingest", db2, str(e)]) == 0
    assert f"if nobody can verify them: bayes-eval ondemand skip {db2} {item}" in capsys.readouterr().out
    import sqlite3

    with contextlib.closing(sqlite3.connect(db2)) as conn, conn:   # a file of schema 2 has no skips table
        conn.execute("DROP TABLE skips")
    assert cli.main(["ondemand", "skip", db2, item]) == 0          # the first skip makes it
    assert "recorded 1 instance as beyond any annotator" in capsys.readouterr().out
    assert cli.main(["ondemand", "skip", db2, "nope"]) != 0
    assert "'nope' is not predicted by any submitted system" in capsys.readouterr().err
    with OnDemand.open(db2) as ev:
        assert item not in ev.next()["items"] and ev.store.skipped_items() == [item]
    # a system none of whose instances can be verified has no estimate (not 0 ± 0: 1 − Û is 1e-16 there)
    tiny = tmp_path / "tiny.csv"
    pd.DataFrame({"item": ["a", "b", "c"]}).to_csv(tiny, index=False)
    with OnDemand.create(str(tmp_path / "ev3.db"), epsilon=0.1) as ev:
        ev.submit_file("T", str(tiny))
        while items := ev.next()["items"]:
            ev.skip(items)
        row = ev.status()["systems"][0]
    assert row["skipped_draws"] == row["draws"] > 3 and not row["reached"]
    assert row["precision"] == {"joint": None, "simple": None, "post": None}


@pytest.mark.slow
def test_sessions_with_skipped_instances_cover_the_precision_on_the_verifiable_ones(tmp_path):
    """80 scripted post-fill sessions of three systems (each its own draw seed) where 20% of the first
    system's correct instances and 3% of the rest cannot be verified (``ondemand skip``): the headline
    precision intervals hold the precision on the verifiable instances within the binomial band of
    0.95, every system's mean error is within 3 Monte Carlo SE of it, and the pool's own precision --
    0.05 higher for the first system -- is held less often (the target is D's, not the pool's)."""
    s, paths, truth, _ = _files(tmp_path)
    unv, prec_d = _unverifiable(paths, truth)
    R = 80
    est, hw = np.zeros((R, 3)), np.zeros((R, 3))
    for r in range(R):
        st = _session_run(tmp_path, "post-fill", r, s, np.array(list(truth)), paths, unv)
        for i, row in enumerate(st["systems"]):
            est[r, i], hw[r, i] = row["precision"]["post"]["estimate"], row["precision"]["post"]["half_width"]
    cover = (np.abs(est - prec_d) <= hw).mean(0)
    band = 3 * np.sqrt(0.95 * 0.05 / R)
    assert np.all(cover >= 0.95 - band - 0.02), cover
    z = (est.mean(0) - prec_d) / (est.std(0, ddof=1) / np.sqrt(R))
    assert np.all(np.abs(z) < 3), z
    pool = (np.abs(est[:, 0] - sim.truth_of(s)[0]) <= hw[:, 0]).mean()
    assert pool < cover[0] - 0.1, (pool, cover)


def test_simulation_with_instances_nobody_can_verify(capsys):
    """``ondemand simulate --unverifiable``: a universe where 30% of the correct instances and 3% of the
    rest cannot be verified (drawn ones skipped, none found by the exhaustive sample).  Every protocol's
    precision, recall and F1 intervals hold the truths on the verifiable instances (mean coverage over
    systems within the binomial band of 0.95, less 0.03 for the Wald intervals of few draws), and miss
    the pool's own precision -- 0.05-0.08 higher -- far more often (the negative control); without any
    unverifiable instance every number is the plain simulation's.  The CLI flags and the JSON keys."""
    from bayes_eval import cli

    s = sim.synthetic_setting(4, n_candidates=10_000, n_correct=600, seed=11)
    su = sim.with_unverifiable(s, 0.03, 0.3, seed=0)
    true_d, true_all = sim.truth_of(su), sim.truth_of(s)
    assert np.all(true_all[:4] - true_d[:4] > 0.04)
    kinds = ("simple", "joint", "joint_post_fill_session")
    R = 60
    res = sim.simulate(su, epsilon=0.08, repeats=R, seed=0, protocols=kinds)
    out = sim.summarize(res)
    band = 3 * np.sqrt(0.95 * 0.05 / (4 * R)) + 0.03
    for k in kinds:
        cov = {m: np.mean([row[m][k]["coverage"] for row in out["systems"]]) for m in ("precision", "recall", "f1")}
        assert min(cov.values()) >= 0.95 - band, (k, cov)     # measured 0.90-0.96
        r = res["runs"][k]
        pool = np.mean(np.abs(r["value"][:, :4] - true_all[:4]) <= r["hw"][:, :4])
        assert pool < cov["precision"] - 0.25, (k, pool)      # the pool's precision is not the target: 0.47-0.59
        assert out["reached"][k] >= 0.95, k
    assert out["unverifiable"]["predicted_correct"] > 0 and out["unverifiable"]["correct"] > 0
    for row in out["systems"]:
        assert row["unverifiable"] > 0 and all(v > 0 for v in row["skipped_draws"].values())
        assert all(row["skipped_draws"][k] < row["draws"][k] for k in kinds)
    # nothing unverifiable: the plain simulation, number for number
    plain = sim.simulate(s, epsilon=0.08, repeats=8, seed=1, protocols=kinds)
    none = sim.simulate(sim.with_unverifiable(s, 0.0, 0.0), epsilon=0.08, repeats=8, seed=1, protocols=kinds)
    for k in kinds:
        for f in ("value", "hw", "n", "new", "n0"):
            np.testing.assert_allclose(none["runs"][k][f], plain["runs"][k][f], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="unverifiable"):
        sim.with_unverifiable(s, 1.0)
    with pytest.raises(ValueError, match="no correct instance that can be verified"):
        sim.simulate(s._replace(unverifiable=s.truth.copy()), repeats=2)
    # the command line
    assert cli.main(["ondemand", "simulate", "synthetic", "--systems", "3", "--repeats", "4", "--epsilon", "0.1",
                     "--unverifiable", "0.02", "--unverifiable-correct", "0.2", "--format", "json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["unverifiable"]["predicted"] > 0 and "skipped_draws" in js["systems"][0]
    assert cli.main(["ondemand", "simulate", "synthetic", "--systems", "3", "--repeats", "4", "--epsilon", "0.1",
                     "--unverifiable", "0.05"]) == 0
    assert "nobody can verify" in capsys.readouterr().out
    assert cli.main(["ondemand", "simulate", "synthetic", "--unverifiable", "1.5"]) == 2
    assert "--unverifiable must be in [0, 1)" in capsys.readouterr().err


def test_post_stratified_precision_and_pooled_recall_covary_as_their_estimates_say():
    """F1 and recall read the covariance of π̂ (post-stratified) and ν̂ (003's pooled recall): over 3,000
    fixed-size samples of systems with 8-60 draws, its estimate averages 0.65-1.25 × the spread of
    (π̂ᵢ, ν̂ᵢ) over samples for every system (measured 0.71-0.97; 003's joint π̂ 0.85-1.08).  Before stop
    92 the linearization centred each draw on its post-stratum's own rate -- a post-stratum of one draw
    had no influence -- and left out the draw's share in 1[n_g ≥ 1]/P(n_g ≥ 1): 0.23-0.79 here, 0.23 for
    the 8-draw system.  With skipped draws the same (0.69-0.97)."""
    R, n = 3000, np.array([60, 10, 40, 8, 25])
    cells, T, U, _, _ = _domain_mc(R, n, seed=7)
    for sk, nn in ((None, T.sum((-1, -2))), (U, n)):
        for f, lo, hi in ((od.post_parts, 0.65, 1.25), (od.joint_parts, 0.8, 1.2)):
            pi, nu, cov = f(cells, T, nn, skipped=sk)
            emp = np.array([np.cov(pi[:, i], nu[:, i])[0, 1] for i in range(5)])
            ratio = cov[:, range(5), range(5, 10)].mean(0) / emp
            assert np.all((ratio > lo) & (ratio < hi)), (f.__name__, sk is None, ratio)
