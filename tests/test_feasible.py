"""What the labels allow (bayes_eval.feasible): the range of G over every completion of the
pool, checked against brute force; the estimate projected onto it and the CLT-based intervals
cut to it, in the simulation and in a session."""
from __future__ import annotations

import itertools
import json
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayes_eval as be
from bayes_eval import measures as M
from bayes_eval.feasible import cut, feasible_range
from bayes_eval.measures import Features


def _tiny(rng, n_classes=2, n_cells=4, max_size=3):
    preds = rng.integers(0, n_classes, n_cells)
    sizes = rng.integers(1, max_size + 1, n_cells)
    labeled = np.zeros((n_cells, n_classes))
    for x in range(n_cells):
        labeled[x] = rng.multinomial(rng.integers(0, sizes[x] + 1), np.full(n_classes, 1.0 / n_classes))
    scores = rng.normal(size=n_cells)
    probs = np.stack([1 - 1 / (1 + np.exp(-scores)), 1 / (1 + np.exp(-scores))], -1)
    if n_classes > 2:
        probs = np.full((n_cells, n_classes), 1.0 / n_classes)
    feats = Features(preds=jnp.asarray(preds[:, None]), scores=jnp.asarray(scores[:, None]),
                     probs=jnp.asarray(probs[:, None, :]))
    return feats, sizes, labeled


def _completions(m, loss, weight, sizes, labeled):
    """Every completion's G (brute force over the unlabeled items' class counts per cell)."""
    C = labeled.shape[1]
    unl = (sizes - labeled.sum(1)).astype(int)
    per_cell = [[np.array(k) for k in itertools.product(range(u + 1), repeat=C) if sum(k) == u] for u in unl]
    out = []
    for ks in itertools.product(*per_cell):
        cnt = labeled + np.array(ks)
        out.append(np.asarray(m.g(jnp.asarray(np.einsum("x,xc,xcd->d", weight, cnt, loss)))))
    return np.array(out)  # (completions, m)


@pytest.mark.parametrize("name", ["f1", "precision", "recall", "accuracy", "f2", "pr_curve", "micro_f1"])
def test_the_range_is_the_brute_force_range_over_every_completion(name):
    rng = np.random.default_rng(7)
    n_classes = 3 if name == "micro_f1" else 2
    m = {"pr_curve": lambda: M.pr_curve([-0.5, 0.0, 0.5]), "micro_f1": lambda: M.micro_f1(3),
         "f2": lambda: M.f_beta(2.0)}.get(name, lambda: M.get(name))()
    assert m.fractional
    # one compilation for every pool of the same shape
    search = jax.jit(lambda loss, w, size, lab: feasible_range(m.g, SimpleNamespace(loss=loss, weight=w, size=size), lab))
    checked = 0
    for _ in range(25):
        feats, sizes, labeled = _tiny(rng, n_classes)
        loss = np.asarray(m.loss(feats))
        w = np.full(len(sizes), 1.0 / sizes.sum())
        rng_ = np.asarray(search(loss, w, sizes.astype(float), labeled))
        vals = _completions(m, loss, w, sizes, labeled)
        for j in range(vals.shape[1]):
            v = vals[:, j]
            if not np.isfinite(v).all():       # some completion leaves it undefined (0/0)
                continue
            if not np.isfinite(rng_[:, j]).all():
                continue                        # undefined at a vertex visited: no range (never wrong)
            assert rng_[0, j] == pytest.approx(v.min(), abs=1e-12)
            assert rng_[1, j] == pytest.approx(v.max(), abs=1e-12)
            # the one-item neighbours are values some completion takes, inside the range
            assert np.isclose(v, rng_[2, j], atol=1e-12).any() and np.isclose(v, rng_[3, j], atol=1e-12).any()
            assert rng_[0, j] <= rng_[2, j] and rng_[3, j] <= rng_[1, j]
            checked += 1
    assert checked >= 20                        # the check was not vacuous


def test_measures_that_are_not_linear_fractional_are_not_projected():
    for m in (M.mcc(), M.balanced_accuracy(), M.fowlkes_mallows(), M.macro_f1(3)):
        assert not m.fractional, m.name
    assert M.stack(M.f1(), M.precision()).fractional
    assert not M.stack(M.f1(), M.mcc()).fractional


def test_cut_widens_an_interval_pressed_against_a_bound_to_one_item():
    feas = np.array([[0.2], [0.8], [0.25], [0.77]])   # lower, upper, lower's and upper's one-item values
    lo, hi = cut(np.array([0.79]), np.array([0.83]), feas)    # past the upper bound: excludes one hidden item
    assert (lo[0], hi[0]) == (0.77, 0.8)
    lo, hi = cut(np.array([0.5]), np.array([0.6]), feas)      # inside: unchanged
    assert (lo[0], hi[0]) == (0.5, 0.6)
    lo, hi = cut(np.array([0.1]), np.array([0.21]), feas)
    assert (lo[0], hi[0]) == (0.2, 0.25)
    lo, hi = cut(np.array([0.1]), np.array([0.9]), feas)      # both ends cut: the range itself
    assert (lo[0], hi[0]) == (0.2, 0.8)
    inf = np.array([[-np.inf], [np.inf], [-np.inf], [np.inf]])
    assert cut(np.array([-0.3]), np.array([1.4]), inf) == (np.array([-0.3]), np.array([1.4]))


@pytest.fixture(scope="module")
def demo_runs():
    """AIS on the demo pool, 40 runs of 1000 labels, the same seeds with F1 projected and not (a
    copy of F1 that does not say it is linear-fractional); 001's AIS without the companion model
    (the projection is the same; the companion's program compiles 7 s longer)."""
    from bayes_eval.simulate import run_simulation

    pool = be.demo_pool(n_items=20_000, positive_rate=0.005, seed=3)
    kw = dict(repeats=40, seed=0, budget=1000, checkpoints=(500, 1000), track_kl=False, companion="none")
    proj, cells = run_simulation(pool, M.f1(), "ais", **kw)
    raw, _ = run_simulation(pool, M.f1()._replace(fractional=False), "ais", **kw)
    return proj, raw


def test_the_simulations_estimate_is_the_raw_one_projected_onto_what_the_labels_allow(demo_runs):
    from bayes_eval.results import covers

    proj, raw = demo_runs
    truth = proj.true_value
    f = proj.checkpoint_feasible                      # (runs, checkpoints, 4, 1)
    assert raw.checkpoint_feasible is not None and np.isinf(raw.checkpoint_feasible[:, :, :2]).all()
    assert np.all((f[:, :, 0] <= truth + 1e-12) & (truth <= f[:, :, 1] + 1e-12))   # the truth is always allowed
    # the same draws: the projected estimate is the raw one clipped onto the range
    np.testing.assert_allclose(proj.checkpoint_value, np.clip(raw.checkpoint_value, f[:, :, 0], f[:, :, 1]),
                               rtol=1e-9)
    moved = proj.checkpoint_value != raw.checkpoint_value
    assert moved.sum() >= 3                           # measured 5 of 80 run-checkpoints: not vacuous
    err_p, err_r = np.abs(proj.checkpoint_value - truth), np.abs(raw.checkpoint_value - truth)
    assert np.all(err_p <= err_r + 1e-12) and np.all(err_p[moved] < err_r[moved])
    # the CLT interval cut to the range covers at least as often as the raw one, and is narrower
    cov_p = covers(proj.checkpoint_lower, proj.checkpoint_upper, truth)
    cov_r = covers(raw.checkpoint_lower, raw.checkpoint_upper, truth)
    assert cov_p.mean() >= cov_r.mean()
    assert np.mean(proj.checkpoint_upper - proj.checkpoint_lower) < np.mean(raw.checkpoint_upper -
                                                                             raw.checkpoint_lower)
    # every stage of the history too, and the confidence sequence stays inside the range
    h = proj.history
    assert np.all((h.value >= h.feasible[:, :, 0] - 1e-12) & (h.value <= h.feasible[:, :, 1] + 1e-12))


def test_a_session_reports_what_the_labels_allow_and_projects_onto_it(tmp_path):
    pool = be.demo_pool(n_items=20_000, positive_rate=0.005, seed=3)
    s = be.Session.create(str(tmp_path / "s.db"), pool, ["f1", "mcc"], "ais", seed=1)
    for _ in range(6):
        b = s.next_batch(50)
        s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    st = s.status(bayesian=False)
    f1, mcc = st["estimates"]
    truth = float(M.value(M.f1(), pool.features(), pool.labels)[0])
    assert f1["feasible_lower"] <= truth <= f1["feasible_upper"]
    assert f1["feasible_lower"] <= f1["estimate"] <= f1["feasible_upper"]
    assert f1["feasible_lower"] <= f1["clt_lower"] <= f1["clt_upper"] <= f1["feasible_upper"]
    assert "feasible_lower" not in mcc                # MCC is not linear-fractional: no range, no projection
    summ = s.summary()
    assert summ.loc[summ.component == "f1", "feasible_upper"].iloc[0] == pytest.approx(f1["feasible_upper"])
    hist = s.history()
    assert (hist["upper"] <= 1.0).all()
    s.close()


def test_session_status_and_report_say_what_the_labels_allow(tmp_path, capsys):
    from bayes_eval.cli import main as cli_main

    pool = be.demo_pool()                             # the CLI's "demo" pool
    path = str(tmp_path / "s.db")
    s = be.Session.create(path, pool, "f1", "ais", seed=1, pool_path="demo")
    for _ in range(4):
        b = s.next_batch(50)
        s.add_labels(b["item"], pool.labels[pool.index_of(b["item"].to_numpy())])
    lo, hi = s.feasible()[:2, 0]
    st = s.status(bayesian=False)
    bs, est = st["blind_spot"], st["estimates"][0]["estimate"]
    lab = s._snapshots[-1].labeled.sum(1)
    s.close()
    capsys.readouterr()
    assert cli_main(["session", "status", path, "--no-bayesian"]) == 0
    out = capsys.readouterr().out
    assert f"what the labels allow, whatever the unlabeled items are: f1 in [{lo:.4f}, {hi:.4f}]" in out
    # what the labels have barely seen (feasible.blind_spot): AIS leaves the low scores all but unlabeled
    assert bs["labels"] < bs["rate"] * lab.sum() / pool.n_items * bs["items"]
    assert bs["share"] > 0.2 and bs["miss_probability"] > 0.5 and bs["values_if_hidden"][0] < est - 0.05
    assert f"barely labeled: {bs['items']:,} items" in out and f"probability {bs['miss_probability']:.0%}" in out
    assert bs["found"] == bs["hidden"] > 0 and "(as many as found so far)" in out
    # with no positive found yet one is hidden there, and the text says so rather than "as many as found"
    from bayes_eval.results import blind_spot_text

    none_found = blind_spot_text(dict(bs, found=0, hidden=1), ["f1"])
    assert "1 positive(s) hidden among them at random (0 found so far, so one)" in none_found
    # whether the interval read first (here the confidence sequence) holds the value with them
    c = st["estimates"][0]
    assert st["headline_interval"] == "clt-cs"
    assert bs["headline_holds"] == [c["cs_lower"] <= bs["values_if_hidden"][0] <= c["cs_upper"]]
    assert ("the interval read first holds the value with them" in out) == bs["headline_holds"][0]
    assert ("the interval read first excludes it for f1" in out) == (not bs["headline_holds"][0])
    assert cli_main(["session", "status", path, "--no-bayesian", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["blind_spot"] == bs
    assert cli_main(["session", "report", path, "--out", str(tmp_path / "rep"), "--no-bayesian"]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert f"f1 in [{lo:.4f}, {hi:.4f}]" in md
    assert f"Barely labeled: {bs['items']:,} items" in md


def test_blind_spot_is_the_twin_with_as_many_positives_hidden_where_labels_are_few():
    """feasible.blind_spot against the twin built by hand: the region is the cells labeled below a
    tenth of the pool's share, the miss probability is that of random placements, and the value
    with the positives hidden is F1 of the twin's confusion counts (the estimate taken exact)."""
    from bayes_eval.feasible import blind_spot
    from bayes_eval.results import blind_spot_text

    # cells: (size, predicted class, true positives, labeled negatives, labeled positives)
    spec = [(40, 1, 30, 5, 20), (200, 0, 12, 60, 6), (3000, 0, 2, 4, 0), (5000, 0, 0, 0, 0), (800, 0, 1, 30, 1)]
    size = np.array([c[0] for c in spec], float)
    pred = np.array([c[1] for c in spec], float)
    pos = np.array([c[2] for c in spec], float)
    labeled = np.array([[c[3], c[4]] for c in spec], float)
    n = size.sum()
    p_cell = np.full(len(spec), 1 / n)
    loss = np.stack([np.stack([np.zeros_like(pred), pred / 2], -1),            # y = 0: [y f, (y + f)/2]
                     np.stack([pred, (1 + pred) / 2], -1)], 1)                  # y = 1
    truth = np.stack([size - pos, pos], -1)
    r_true = np.einsum("x,xc,xcd->d", p_cell, truth, loss)
    f1 = M.f1()
    bs = blind_spot(size, labeled, p_cell, [loss], [f1.g], [r_true])
    share = labeled.sum() / n                                                   # 126 / 9040
    region = labeled.sum(1) / size < 0.1 * share
    assert region.tolist() == [False, False, True, True, False]
    assert (bs["items"], bs["cells"], bs["items_without_label"], bs["labels"], bs["positives"]) == (8000, 2, 5000, 4, 0)
    k = int(labeled[:, 1].sum())
    assert (bs["found"], bs["hidden"]) == (k, 27)
    # random placements of the 27 among the region's 8000 items: how often no labeled item is hit
    rng = np.random.default_rng(0)
    hits = np.array([rng.choice(8000, k, replace=False).min() >= 4 for _ in range(20000)])   # items 0..3 labeled
    assert abs(hits.mean() - bs["miss_probability"]) < 4 * np.sqrt(bs["miss_probability"] * (1 - bs["miss_probability"]) / 20000)
    # the twin: k more positives, all predicted negative, so TP and predicted positives stay
    tp, pp, p_all = float((pos * pred).sum()), float((size * pred).sum()), float(pos.sum())
    assert bs["values_if_hidden"][0] == pytest.approx(2 * tp / (pp + p_all + k), rel=1e-9)
    # shown estimates move by the same shift; precision does not move (the hidden items are predicted negative)
    prec = M.precision()
    loss_p = np.stack([np.stack([np.zeros_like(pred), pred], -1), np.stack([pred, pred], -1)], 1)   # [y f, f]
    bs2 = blind_spot(size, labeled, p_cell, [loss, loss_p], [f1.g, prec.g],
                     [r_true, np.einsum("x,xc,xcd->d", p_cell, truth, loss_p)], values=[0.5, 0.9])
    assert bs2["values_if_hidden"][0] == pytest.approx(0.5 + 2 * tp / (pp + p_all + k) - 2 * tp / (pp + p_all))
    assert bs2["values_if_hidden"][1] == pytest.approx(0.9)
    # a region smaller than the positives found (a pool of many positives): K is every unlabeled item
    # there, not an impossible 107 among 41 items (stop 79: the status said 146 among 41, probability 0%)
    spec = [(200, 1, 150, 10, 100), (200, 0, 12, 60, 6), (20, 0, 2, 0, 0), (21, 0, 0, 0, 0), (800, 0, 1, 30, 1)]
    size = np.array([c[0] for c in spec], float)
    pred = np.array([c[1] for c in spec], float)
    pos = np.array([c[2] for c in spec], float)
    labeled = np.array([[c[3], c[4]] for c in spec], float)
    p_cell = np.full(len(spec), 1 / size.sum())
    loss = np.stack([np.stack([np.zeros_like(pred), pred / 2], -1), np.stack([pred, (1 + pred) / 2], -1)], 1)
    r_true = np.einsum("x,xc,xcd->d", p_cell, np.stack([size - pos, pos], -1), loss)
    bs3 = blind_spot(size, labeled, p_cell, [loss], [f1.g], [r_true])
    assert (bs3["items"], bs3["cells"], bs3["labels"], bs3["found"], bs3["hidden"]) == (41, 2, 0, 107, 41)
    assert bs3["miss_probability"] == 1.0                         # no label there: nothing could have seen them
    tp, pp, p_all = float((pos * pred).sum()), float((size * pred).sum()), float(pos.sum())
    assert bs3["values_if_hidden"][0] == pytest.approx(2 * tp / (pp + p_all + 41), rel=1e-9)
    capped = blind_spot_text(bs3, ["f1"])
    assert "41 positive(s) hidden among them at random (every unlabeled item there; 107 found so far)" in capped
    assert "probability 100%" in capped
    # every cell labeled near the pool's share: no blind spot; a pool that is not binary: none
    assert blind_spot(size, np.stack([size * 0.01, size * 0.0], -1), p_cell, [loss], [f1.g], [r_true]) is None
    assert blind_spot(size, np.zeros((5, 3)), p_cell, [loss], [f1.g], [r_true]) is None


def test_the_twins_values_stay_inside_what_the_labels_allow():
    """``blind_spot``'s twin is a completion of the pool, so its value lies in what the labels
    allow: a precision shown at 1.0 (projected) moved by g(R̂ + KΔR) − g(R̂) read 1.0002 in
    ``session status`` (stop 82's walk); with ``value_range`` it is clipped, without it (the
    negative control) it passes 1."""
    from bayes_eval.feasible import blind_spot

    size = np.array([10.0, 1000.0, 1000.0])               # predicted positive labeled; predicted positive; negative
    labeled = np.array([[0.0, 5.0], [0.0, 0.0], [0.0, 0.0]])
    p_cell = np.full(3, 1 / 2010)
    loss = np.array([[[0, 1], [1, 1]], [[0, 1], [1, 1]], [[0, 0], [0, 0]]], float)   # precision: [y f, f]
    g = M.precision().g
    kw = dict(values=np.array([1.0]))
    free = blind_spot(size, labeled, p_cell, [loss], [g], [np.array([0.004, 0.005])], **kw)
    assert free["values_if_hidden"][0] > 1.0
    cut_ = blind_spot(size, labeled, p_cell, [loss], [g], [np.array([0.004, 0.005])],
                      value_range=(np.array([0.0]), np.array([1.0])), **kw)
    assert cut_["values_if_hidden"] == [1.0] and cut_["hidden"] == free["hidden"] == 5
