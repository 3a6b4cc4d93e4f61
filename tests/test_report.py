"""The Bayesian report (:mod:`bayes_eval.report`): ArviZ groups, diagnostics, the side-by-side
table, the posterior predictive check and the plots.

Fast tier: the calibrated model by NUTS on 1000 labels of abt-buy (structure of everything,
no divergences), one fit with short chains shared by the module; skipped, with the reason,
when ../shared (abt-buy) is absent.  The report's argument checks and the HDI run on
synthetic pools, always.  Slow tier: the diagnostics targets (R-hat, bulk ESS; DESIGN.md §8)
at the report's default chain lengths, for the calibrated model and for NUTS on the 256-leaf
depth-8 Dirichlet tree after 1000 AIS labels of abt-buy; the Gibbs route, determinism.
"""
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from bayes_eval import measures as M
from bayes_eval.pool import Pool, demo_pool
from bayes_eval import report as R
from bayes_eval.models.calibrated import BANDS

from conftest import shared_pool_path

THRESHOLDS = np.linspace(-2.0, 2.0, 10)
N_LABELS = 1000
# fewer and shorter chains than the default 4 x (500 + 1000), to keep the fast tier fast.  Too short for
# DESIGN.md §8's targets: over 8 seeds x 2 XLA levels (stop 69) max R-hat of (a, b, log κ) was
# > 1.01 on 8 of 16 fits (up to 1.18), min bulk ESS 95-691, both met on 7 -- so the targets
# are checked at the default lengths, in the slow tier (test_calibrated_nuts_diagnostics)
# Two chains (stop 72): the fixture checks the report's structure, and 4 chains cost 69 s of the
# tier's time against 46 s for 2 (seed 2, one core; seeds 2-5 at 2 chains: no divergence, the F1
# interval holding the truth, all 20 components live, R-hat of F1 <= 1.008)
NUTS = {"num_chains": 2, "num_warmup": 300, "num_samples": 400}


def _labels_by_score(pool, n, seed=0):
    """n distinct items drawn with probability ∝ sqrt(sigmoid(score)) + 0.01 (a design that
    looks only at scores: ignorable, 001 §4.2)."""
    rng = np.random.default_rng(seed)
    p = np.sqrt(pool.probs[:, 0, 1]) + 0.01
    rows = rng.choice(pool.n_items, size=n, replace=False, p=p / p.sum())
    return pool.ids[rows], pool.labels[rows]


@pytest.fixture(scope="module")
def report():
    """The calibrated model by NUTS after 1000 labels of abt-buy, for F1 and a PR curve: one
    fit serves every fast test of this module.  Without ../shared the tests that use it
    are skipped, with the reason (a synthetic stand-in would not meet the diagnostics
    targets that test_calibrated_nuts_diagnostics states for abt-buy)."""
    return _abt_buy_nuts_report(**NUTS)


def _abt_buy_nuts_report(**chains):
    """The calibrated model by NUTS (seed 2) after N_LABELS labels of abt-buy, for F1 and a PR
    curve, with a stand-in estimate and CLT interval around the truth."""
    pool = Pool.from_file(shared_pool_path("abt-buy"))
    measure = [M.f1(), M.pr_curve(THRESHOLDS)]
    items, labels = _labels_by_score(pool, N_LABELS, seed=4)
    truth = pool.true_value(M.stack(*measure))
    est = truth + 0.01
    return R.posterior_report(pool, measure, items, labels, estimate=est, clt=(est - 0.05, est + 0.05), truth=truth,
                              model="calibrated", method="nuts", seed=2, **chains)


def _live_components_of_a_covering_fit(rep):
    """What every NUTS fit of the module holds: no divergences, at least five components of G
    with a posterior spread, the F1 row first, its HDI in [0, 1] and its 95% interval holding
    the truth; returns the table's live rows."""
    assert int(rep.fit.sample_stats["diverging"].sum()) == 0
    t = rep.table
    live = t["eq_width"] > 0
    assert live.sum() >= 5
    f1 = t.iloc[0]
    assert f1["component"] == "f1"
    assert 0 <= f1["hdi_lower"] <= f1["hdi_upper"] <= 1
    assert f1["eq_lower"] <= f1["truth"] <= f1["eq_upper"], f1
    return t.loc[live]


def test_inference_data_groups(report):
    idata = report.idata
    for group in ("posterior", "posterior_predictive", "observed_data", "sample_stats", "constant_data"):
        assert hasattr(idata, group), group
    post = idata.posterior
    assert {"a", "b", "kappa", "log_kappa", "pi", "G"} <= set(post.data_vars)
    assert post.sizes["chain"] == NUTS["num_chains"] and post.sizes["draw"] == NUTS["num_samples"]
    assert post["G"].sizes["component"] == 1 + 2 * THRESHOLDS.size
    assert list(post["G"]["component"].values[:2]) == ["f1", f"precision@{THRESHOLDS[0]:.6g}"]
    pp = idata.posterior_predictive
    assert {"label_counts", "unlabeled_counts", "unlabeled_positives", "G"} <= set(pp.data_vars)
    obs = idata.observed_data["label_counts"].values
    assert obs.shape == (256, 2) and obs.sum() == N_LABELS
    # replicates keep the labeled totals per stratum; completions keep the unlabeled ones
    np.testing.assert_array_equal(pp["label_counts"].sum("class").values[0, 0], obs.sum(1))
    unl = idata.constant_data["unlabeled"].values
    np.testing.assert_array_equal(pp["unlabeled_counts"].sum("class").values[0, 0], unl)
    assert idata.constant_data["strata_sizes"].values.sum() == report.item_cell.size
    assert {"prior_a", "prior_b", "prior_log_kappa", "classifier_probs"} <= set(idata.constant_data.data_vars)
    ss = idata.sample_stats
    assert {"diverging", "tree_depth", "n_steps", "step_size", "energy", "lp"} <= set(ss.data_vars)
    assert ss["tree_depth"].values.min() >= 1
    assert idata.attrs["labels"] == N_LABELS and idata.posterior.attrs["model"] == "calibrated"


def test_arviz_summary_reports_rhat_and_ess(report):
    import arviz as az

    s = az.summary(report.idata, var_names=["a", "b", "kappa", "G"], coords={"component": ["f1"]},
                   round_to="none")
    assert {"r_hat", "ess_bulk", "ess_tail", "mean", "sd"} <= set(s.columns)
    assert "G[f1]" in s.index
    rows = s.loc[["a", "b", "kappa", "G[f1]"]]
    assert np.all(np.isfinite(rows[["r_hat", "ess_bulk"]].to_numpy()))
    # the table's diagnostics of G are ArviZ's
    assert abs(rows.loc["G[f1]", "r_hat"] - report.table["r_hat"].iloc[0]) < 1e-9
    assert abs(rows.loc["G[f1]", "ess_bulk"] - report.table["ess_bulk"].iloc[0]) < 1e-6
    # every variable of the posterior; components of G that are constant across draws
    # (e.g. recall at a threshold below every positive) make ArviZ warn 0/0 in R-hat
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        full = az.summary(report.idata)
    # a, b, kappa, log_kappa, the curve's band offsets, π per stratum and class, G, the PR curve
    assert len(full) == 4 + BANDS + 256 * 2 + 1 + 2 * THRESHOLDS.size
    assert {f"band_offset[{j}]" for j in range(BANDS)} <= set(full.index)
    # the report's own summary picks the scalar parameters and G
    assert {"a", "b", "kappa", "log_kappa", "G[f1]"} <= set(report.summary().index)


def test_summary_table_columns_and_intervals(report):
    t = report.table
    assert list(t.columns[: len(R.TABLE_COLUMNS)]) == list(R.TABLE_COLUMNS)
    assert {"truth", "clt_covers", "eq_covers", "hdi_covers"} <= set(t.columns)
    assert len(t) == 1 + 2 * THRESHOLDS.size and t["labels"].eq(N_LABELS).all()
    assert (t["model"] == "calibrated").all() and (t["method"] == "nuts").all()
    draws = report.fit.value.reshape(-1, len(t))
    ok = np.isfinite(t["eq_lower"]).to_numpy()
    assert ok.sum() >= len(t) - 2  # precision above every score may be 0/0
    lo, hi = np.nanmin(draws, 0)[ok], np.nanmax(draws, 0)[ok]
    for name in ("eq", "hdi"):
        a, b = t[f"{name}_lower"].to_numpy()[ok], t[f"{name}_upper"].to_numpy()[ok]
        assert np.all((lo <= a) & (a <= b) & (b <= hi)), name  # inside the support of the draws
        assert np.all((a >= 0) & (b <= 1)), name  # and of the measure
        np.testing.assert_allclose(t[f"{name}_width"].to_numpy()[ok], b - a)
    # the HDI is the shortest 95% interval
    assert np.all(t["hdi_width"].to_numpy()[ok] <= t["eq_width"].to_numpy()[ok] + 1e-12)
    np.testing.assert_allclose(t["clt_width"], 0.1)
    f1 = t.iloc[0]
    assert f1["eq_lower"] <= f1["post_median"] <= f1["eq_upper"]
    # the same table from the InferenceData (e.g. after a netCDF round trip)
    t2 = R.summary_table(report.idata, report.estimate, report.clt)
    pd.testing.assert_frame_equal(t2, t[list(R.TABLE_COLUMNS)], check_dtype=False)


def test_ppc_table_and_plots(report, tmp_path):
    p = report.ppc
    assert list(p.columns) == list(R.PPC_COLUMNS)
    assert p["n_labeled"].sum() == N_LABELS and (p["class"] == 1).all()
    assert p[["p_ge", "p_le"]].apply(lambda c: c.between(0, 1).all()).all()
    assert np.all(p["p_ge"] + p["p_le"] >= 1.0)
    assert (p["pred_lower"] <= p["pred_upper"]).all()
    assert 0.0 <= p.attrs["ppp_chi2"] <= 1.0
    p2 = R.ppc_table(report.idata)
    pd.testing.assert_frame_equal(p, p2)
    for name, fn in (("density", lambda f: report.plot_density("f1", path=f)),
                     ("pr", lambda f: report.plot_pr_band(path=f)),
                     ("ppc", lambda f: report.plot_ppc(path=f))):
        path = tmp_path / f"{name}.png"
        fig = fn(str(path))
        assert path.stat().st_size > 10_000, name
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_hdi_inside_support():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.beta(2, 8, size=4000), [np.nan]])
    lo, hi = R.hdi(x, 0.95)
    assert 0 <= lo < hi <= 1
    assert np.mean((x >= lo) & (x <= hi)) >= 0.949 * 4000 / 4001
    np.testing.assert_array_equal(R.hdi(np.full(10, 0.3)), [0.3, 0.3])


def test_bad_arguments():
    pool = demo_pool(n_items=2000, positive_rate=0.05, seed=1)
    items, labels = _labels_by_score(pool, 50)
    with pytest.raises(ValueError, match="model must be one of"):
        R.posterior_report(pool, "f1", items, labels, model="gp")
    with pytest.raises(ValueError, match="method must be one of"):
        R.posterior_report(pool, "f1", items, labels, method="vi")
    with pytest.raises(ValueError, match="a deterministic oracle gives one label per item"):
        R.posterior_report(pool, "f1", np.r_[items[:1], items[:1]], np.r_[labels[:1], 1 - labels[:1]])
    with pytest.raises(ValueError, match="estimate has 2 components"):
        R.summary_table(_tiny_fit(), estimate=[0.1, 0.2])


def _tiny_fit():
    v = np.random.default_rng(0).random((2, 50, 1))
    k = np.zeros((2, 50, 3, 2))
    return R.FinitePoolFit("calibrated", "fast", ("f1",), v, {}, k + 0.5, k, k, np.zeros((3, 2)), np.zeros(3),
                           np.ones(3), np.full((3, 2), 0.5), {}, None, 0.0)


def test_short_nuts_chains_have_no_divergences_and_their_f1_interval_covers(report):
    """The module's short NUTS run on the calibrated model (1000 labels of abt-buy): no
    divergences, finite diagnostics for every live component, and the 95% interval of F1
    holds the true F1.  The R-hat and ESS targets need the default chain lengths: the slow
    tier's test_calibrated_nuts_diagnostics."""
    live = _live_components_of_a_covering_fit(report)
    assert np.all(np.isfinite(live[["r_hat", "ess_bulk"]].to_numpy()))


# ---------------------------------------------------------------------------------------
# slow tier
# ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_calibrated_nuts_diagnostics():
    """NUTS on the calibrated model after 1000 labels of abt-buy at the report's default
    chain lengths (4 x (500 + 1000)): bulk ESS > 400 for (a, b, log κ) and every live
    component of G (DESIGN.md §8), R-hat < 1.02, no divergences, and the 95% interval of F1
    holds the true F1.  Measured over 8 seeds at XLA's default level (stop 69): max R-hat
    1.0015-1.0095, min bulk ESS 882-1,693 -- §8's R-hat < 1.01 holds on every seed, but with no
    margin for one fit's round-off (XLA's code differs between CPUs), so one fit is held to
    1.02."""
    rep = _abt_buy_nuts_report(num_chains=4, num_warmup=500, num_samples=1000)
    s = rep.summary(var_names=["a", "b", "log_kappa"], round_to="none")
    assert s["r_hat"].max() < 1.02, s
    assert s["ess_bulk"].min() > 400, s
    live = _live_components_of_a_covering_fit(rep)
    assert live["r_hat"].max() < 1.02, live[["component", "r_hat"]]
    assert live["ess_bulk"].min() > 400, live[["component", "ess_bulk"]]


@pytest.mark.slow
def test_dirichlet_tree_nuts_diagnostics_after_1000_ais_labels(tmp_path):
    """NUTS on the 256-leaf depth-8 Dirichlet tree after 1000 AIS labels of abt-buy (a real
    session): R-hat < 1.01 and bulk ESS > 400 for θ and F1, no divergences."""
    import arviz as az

    from bayes_eval.session import Session

    pool = Pool.from_file(shared_pool_path("abt-buy"))
    s = Session.create(str(tmp_path / "s.db"), pool, "f1", "ais", seed=0)
    s.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=1000, batch=50)
    t0 = time.perf_counter()
    rep = R.report_from_session(s, model="dirichlet-tree", method="nuts", seed=0)
    elapsed = time.perf_counter() - t0
    s.close()
    assert rep.fit.n_labels == 1000
    assert rep.fit.info["depth"] == 8 and rep.fit.info["branching"] == 2
    summ = az.summary(rep.idata, var_names=["theta", "G"])
    assert summ["r_hat"].max() < 1.01, summ
    assert summ["ess_bulk"].min() > 400, summ
    assert int(rep.idata.sample_stats["diverging"].sum()) == 0
    assert rep.idata.posterior["phi"].shape[2:] == (2, 255, 2)
    phi = az.summary(rep.idata, var_names=["phi"], kind="diagnostics")
    assert phi["r_hat"].max() < 1.02
    # the session's CLT numbers are in the table
    assert np.isfinite(rep.table[["estimate", "clt_lower", "clt_upper"]].to_numpy()).all()
    print(f"\nDirichlet-tree NUTS report on abt-buy: {elapsed:.1f} s wall, {rep.fit.info['cpu_seconds']:.1f} s CPU")


@pytest.mark.slow
def test_gibbs_route_and_determinism():
    pool = demo_pool(n_items=20_000, positive_rate=0.01, seed=3)
    items, labels = _labels_by_score(pool, 600)
    a = R.posterior_report(pool, "f1", items, labels, model="dirichlet-tree", method="fast", seed=5)
    b = R.posterior_report(pool, "f1", items, labels, model="dirichlet-tree", method="fast", seed=5)
    np.testing.assert_array_equal(a.fit.value, b.fit.value)
    assert not hasattr(a.idata, "sample_stats")
    assert {"theta", "phi", "pi", "G"} <= set(a.idata.posterior.data_vars)
    c = R.posterior_report(pool, "f1", items, labels, model="calibrated", method="fast", seed=5)
    assert c.fit.info["n_proposals"] == 4096
    # the fast route's program is compiled once per setting and shape (the labels are its arguments): a fit on
    # other labels in between leaves the draws of these labels as they were
    other = R.posterior_report(pool, "f1", items[:300], labels[:300], model="calibrated", method="fast", seed=5)
    again = R.posterior_report(pool, "f1", items, labels, model="calibrated", method="fast", seed=5)
    np.testing.assert_array_equal(c.fit.value, again.fit.value)
    assert np.median(other.fit.value) != np.median(c.fit.value)
    d1 = R.posterior_report(pool, "f1", items, labels, model="calibrated", method="nuts", seed=7)
    d2 = R.posterior_report(pool, "f1", items, labels, model="calibrated", method="nuts", seed=7)
    np.testing.assert_array_equal(d1.fit.value, d2.fit.value)
    # the two calibrated routes agree on the posterior of F1
    x, y = c.fit.value.ravel(), d1.fit.value.ravel()
    assert abs(np.median(x) - np.median(y)) < 0.1 * (np.quantile(y, 0.975) - np.quantile(y, 0.025)) + 1e-9


@pytest.mark.parametrize("model", [pytest.param(m, marks=pytest.mark.slow) if m == "calibrated" else m
                                   for m in R.MODELS])
def test_every_registered_posterior_sampler_reports(model):
    """The recipe of ``models/posterior_samplers.py``: every sampler in the models registry
    (``POSTERIOR_SAMPLERS``) runs through ``fit_finite_pool`` and ``to_inference_data``
    with its own parameters, prior and dims (the report never looks at the model's
    name), and its finite-pool posterior is exact when every item is labeled: every
    draw of F1 equals the pool's true F1.  The calibrated model's route (~20 s of
    compilation) is in the slow tier; its NUTS route is the module fixture's."""
    from bayes_eval.models.registry import POSTERIOR_SAMPLERS

    pool = demo_pool(n_items=400, positive_rate=0.1, seed=1)
    items, labels = pool.ids, pool.labels
    rep = R.posterior_report(pool, "f1", items, labels, model=model, method="fast", seed=0, n_strata=8, depth=3,
                             num_chains=2, num_warmup=20, num_samples=30, n_proposals=256)
    fit = rep.fit
    assert fit.model == model and model in POSTERIOR_SAMPLERS
    post = rep.idata.posterior
    for name, v in fit.params.items():
        assert name in post.data_vars and v.shape[:2] == (2, 30)
        assert list(post[name].dims[2:]) == fit.dims.get(name, [f"{name}_dim_{i}" for i in range(v.ndim - 2)])
    for name in fit.prior:
        assert f"prior_{name}" in rep.idata.constant_data.data_vars
    truth = float(pool.true_value(M.f1())[0])
    np.testing.assert_allclose(fit.value[..., 0], truth, rtol=0, atol=1e-12)


def test_the_session_posterior_plot_frames_the_intervals_and_names_the_tail_it_leaves_out():
    """posterior.png's x-range (plots.session_posterior_view): every interval end and the
    estimate inside the frame, away from its edges; a long thin tail of the posterior (a
    completion with several hidden positives) left out and named with its share; nothing
    named when every draw is in the frame."""
    from bayes_eval.plots import session_posterior_view

    rng = np.random.default_rng(0)
    d = np.r_[0.8333 - 0.0035 * rng.poisson(0.3, 985), rng.uniform(0.5, 0.75, 15)]   # 1.5% far tail
    ivs = [(0.7969, 0.8333), (0.8313, 0.8361)]
    lo, hi, note = session_posterior_view(d, ivs, 0.8337)
    ends = [v for iv in ivs for v in iv] + [0.8337]
    assert lo < min(ends) and max(ends) < hi and hi - lo < 0.1
    share = np.mean(d < lo)
    assert 0 < share <= 0.015 and note.startswith(f"not shown: {100 * share:.1f}% of draws below {lo:.3f}")
    lo2, hi2, note2 = session_posterior_view(np.linspace(0.6, 0.8, 200), [(0.62, 0.78)], 0.7)
    assert note2 == "" and lo2 < 0.62 and hi2 > 0.78


def test_the_pr_curve_says_when_its_band_rests_on_the_positives_found():
    """session report's pr_curve.png: where the session's CLT check fails for its first
    measure, a second title line says the CLT band rests on the positives found; where the
    check passes or the design has none, nothing is added."""
    from types import SimpleNamespace

    import pandas as pd

    from bayes_eval.plots import plot_pr_curve
    from bayes_eval.session_report_cli import _pr_caveat

    def session(checks):
        return SimpleNamespace(clt_check=lambda: np.asarray(checks, float),
                               measures=[SimpleNamespace(names=("f1",))])

    caveat = _pr_caveat(session([96.7, 1.0]))
    assert caveat == "CLT check fails: the band rests on the positives found"
    assert _pr_caveat(session([1.2, 300.0])) is None          # only the first measure's components count
    assert _pr_caveat(session([np.nan])) is None               # no check for the design
    table = pd.DataFrame({"threshold": ["1.0", "0.0", "-1.0"], "recall": [0.2, 0.6, 0.9], "precision": [1.0, 0.8, 0.5],
                          "precision_lower": [0.9, 0.7, 0.4], "precision_upper": [1.0, 0.9, 0.6],
                          "recall_lower": [0.1, 0.5, 0.8], "recall_upper": [0.3, 0.7, 1.0]})
    fig = plot_pr_curve(table, None, title="PR curve from 500 labels", caveat=caveat)
    assert fig.axes[0].get_title() == "PR curve from 500 labels\n" + caveat
    assert plot_pr_curve(table, None, title="PR curve").axes[0].get_title() == "PR curve"
    # with the posterior's band (session report with a Bayesian posterior): the caveat points to it,
    # and both panels draw the posterior's curve and band beside the estimate's
    assert _pr_caveat(session([96.7]), bayes_band=True) == ("CLT check fails: the CLT band rests on the positives "
                                                            "found; read the Bayesian band")
    assert _pr_caveat(session([1.2]), bayes_band=True) is None
    table = table.assign(precision_bayes_median=[1.0, 0.75, 0.45], precision_bayes_lower=[0.95, 0.6, 0.3],
                         precision_bayes_upper=[1.0, 0.85, 0.55], recall_bayes_median=[0.25, 0.55, 0.85],
                         recall_bayes_lower=[0.2, 0.4, 0.7], recall_bayes_upper=[0.3, 0.65, 0.95])
    fig = plot_pr_curve(table, None, title="PR curve", caveat="x")
    for ax, what in zip(fig.axes, ("precision", "recall")):
        labels = ax.get_legend_handles_labels()[1]
        assert labels == ["design's estimate", f"95% Bayesian band ({what})", "posterior median",
                          f"95% CLT band ({what})"], labels
    assert fig.axes[1].get_xlabel() == "threshold (score)"



def test_the_pr_table_of_a_session_whose_measure_is_the_curve_takes_its_intervals():
    """A session created with a pr_curve measure: the report's table takes the curve's CLT
    interval from ``Session.intervals`` and its Bayesian band (median, ends) from
    ``Session.bayesian_interval``, component by component; with ``bayesian=False`` no band."""
    from types import SimpleNamespace

    from bayes_eval.session_report_cli import _pr_curve_table

    pr = M.pr_curve(np.array([-1.0, 0.0, 1.0]))
    names = list(pr.names)
    rng = np.random.default_rng(0)
    est = rng.uniform(0.2, 0.8, len(names))
    clt = pd.DataFrame({"component": names[::-1], "kind": "clt", "estimate": est[::-1],
                        "lower": est[::-1] - 0.1, "upper": est[::-1] + 0.1})   # in another order
    bay = pd.DataFrame({"component": names, "kind": "bayes", "estimate": est - 0.01, "lower": est - 0.2,
                        "upper": est + 0.05, "collapsed": False})
    s = SimpleNamespace(measures=[M.f1(), pr], intervals=lambda level, bayesian: clt,
                        bayesian_interval=lambda level: bay)
    df = _pr_curve_table(s, 16, 0.95, bayesian=True)
    assert list(df["threshold"]) == ["-1", "0", "1"]
    np.testing.assert_allclose(df["precision"], est[:3])
    np.testing.assert_allclose(df["recall_lower"], est[3:] - 0.1)
    np.testing.assert_allclose(df["precision_bayes_median"], est[:3] - 0.01)
    np.testing.assert_allclose(df["recall_bayes_lower"], est[3:] - 0.2)
    np.testing.assert_allclose(df["recall_bayes_upper"], est[3:] + 0.05)
    assert "precision_bayes_lower" not in _pr_curve_table(s, 16, 0.95, bayesian=False).columns
