"""Every figure of the package (matplotlib, Agg), in one module.

Two families, both drawn off-screen (matplotlib is imported inside the functions, with
the Agg backend, so importing this module is cheap and never needs a display):

* the finite-pool posterior next to the CLT interval, from a
  :class:`~bayes_eval.report.FinitePoolFit` or its :class:`arviz.InferenceData`
  (:func:`plot_density`, :func:`plot_pr_band`, :func:`plot_ppc`; :mod:`bayes_eval.report`
  re-exports them and :class:`~bayes_eval.report.PosteriorReport` has them as methods);
  these return the :class:`matplotlib.figure.Figure` (a pyplot figure: close it with
  ``plt.close``) and save a PNG when given a ``path``;
* a labeling session's figures, read through the public methods of a
  :class:`~bayes_eval.session.Session` (:func:`plot_progress`, behind
  ``Session.plot_progress``; :func:`plot_session_posterior`) or from a table
  (:func:`plot_pr_curve`), as ``bayes-eval session report`` writes them.

What the figures summarise (draws of G, HDIs, the posterior predictive check) is computed
in :mod:`bayes_eval.summaries`; this module only draws.  It imports neither the command
line nor the session module (a session is passed in).
"""
from __future__ import annotations

import re
import warnings

import numpy as np

from .errors import SessionError
from .posterior import equal_tailed
from .summaries import clt_arrays, g_draws, hdi, ppc_table

__all__ = [
    "plot_density",
    "plot_pr_band",
    "plot_ppc",
    "plot_progress",
    "plot_session_posterior",
    "plot_pr_curve",
]


# --------------------------------------------------------------------------------------
# The finite-pool posterior (pyplot figures)
# --------------------------------------------------------------------------------------
def _pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo", "ps"):
        try:
            matplotlib.use("Agg")
        except Exception:  # pragma: no cover - an interactive backend already in use
            pass
    import matplotlib.pyplot as plt

    return plt


def _component_index(names, component):
    if isinstance(component, (int, np.integer)):
        return int(component)
    if component in names:
        return names.index(component)
    raise ValueError(f"unknown component {component!r}; components are {names[:8]}{'...' if len(names) > 8 else ''}")


def _finish(fig, path):
    if path is not None:
        fig.savefig(path, dpi=130, bbox_inches="tight")
    return fig


def _bins(x, most: int = 60):
    """Histogram bins for draws of G on a finite pool, which sit on a lattice of atoms:
    about two atoms per bin, so that no bin falls between atoms and shows a false gap."""
    u = np.unique(np.round(x, 12))
    if u.size < 2:
        return 1
    width = 2.0 * float(np.median(np.diff(u)))
    return int(np.clip(np.ptp(u) / max(width, 1e-300), 10, most))


def plot_density(obj, component=0, estimate=None, clt=None, *, truth=None, level: float = 0.95, path=None,
                 title: str | None = None, compare=None):
    """Posterior density of one component of G with the CLT interval and Ĝ overlaid.

    The histogram and density of the posterior draws (the finite-pool posterior of
    :mod:`bayes_eval.posterior`), the Bayesian equal-tailed and HDI intervals as bars under it, the
    CLT interval of 001 §3.3.2 as a shaded band with the importance-weighted estimate
    in its middle, and the truth where known.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData
    component : int or str, default 0
    estimate, clt, truth :
        As in :func:`~bayes_eval.report.summary_table` (full length m), or scalars for
        the chosen component.
    level : float, default 0.95
    path : str, optional
        Where to save the PNG.
    title : str, optional
    compare : dict of str to FinitePoolFit or InferenceData, optional
        Further posteriors of the same component (e.g. another oracle model), drawn as
        step histograms with their equal-tailed intervals as bars.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import arviz as az

    plt = _pyplot()
    values, names, attrs = g_draws(obj)
    j = _component_index(names, component)

    def draws_of(o):
        v, n, _ = g_draws(o)
        x_ = v.reshape(-1, len(n))[:, _component_index(n, names[j])]
        return x_[np.isfinite(x_)]

    def pick(v):
        if v is None:
            return None
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return float(v[j] if v.size == len(names) else v[0])

    x = draws_of(obj)
    others = [(lab, draws_of(o)) for lab, o in (compare or {}).items()]
    est, t = pick(estimate), pick(truth)
    clo, chi = (pick(clt[0]), pick(clt[1])) if clt is not None else (None, None)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    if x.size == 0:
        ax.text(0.5, 0.5, "no finite posterior draws", ha="center", transform=ax.transAxes)
        return _finish(fig, path)
    main = f"{attrs.get('model')}, {attrs.get('method')}"
    pts = [x.min(), x.max(), clo, chi, t, est] + [f(o) for _, o in others if o.size for f in (np.min, np.max)]
    pts = [v for v in pts if v is not None and np.isfinite(v)]
    pad = 0.05 * max(max(pts) - min(pts), 1e-6)
    ax.set_xlim(min(pts) - pad, max(pts) + pad)
    ax.hist(x, bins=_bins(x), density=True, color="tab:blue", alpha=0.3, label=f"posterior draws ({main})")
    ymax = ax.get_ylim()[1]
    colors = ["tab:blue", "tab:purple", "tab:brown", "tab:gray"]
    if np.ptp(x) > 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grid, dens = az.kde(x)
        ax.plot(grid, dens, color="tab:blue", lw=1.8, label=f"posterior density ({main})")
        ymax = max(ymax, float(np.max(dens)))
    for i, (lab, xi) in enumerate(others, 1):
        if xi.size > 1:
            # a step histogram: finite-pool posteriors are discrete, a KDE of a
            # concentrated one wiggles between the atoms
            hv, _, _ = ax.hist(xi, bins=_bins(xi), density=True, histtype="step", color=colors[i % 4], lw=1.6,
                               label=f"posterior draws ({lab})")
            ymax = max(ymax, float(np.max(hv)))
    if clo is not None and chi is not None and np.isfinite(clo) and np.isfinite(chi):
        ax.axvspan(clo, chi, color="tab:orange", alpha=0.18, label=f"CLT {level:.0%} interval [{clo:.3f}, {chi:.3f}]")
        for v in (clo, chi):
            ax.axvline(v, color="tab:orange", lw=1.0, ls=":")
    if est is not None and np.isfinite(est):
        ax.axvline(est, color="tab:orange", lw=2.0, label=f"estimate (IS) {est:.3f}")
    if t is not None and np.isfinite(t):
        ax.axvline(t, color="black", lw=1.6, ls="--", label=f"truth {t:.3f}")
    step = 0.07 * ymax
    y = -step
    eq = np.ravel(equal_tailed(x[:, None], level))
    h = hdi(x, level)
    ax.plot(eq, [y, y], color="tab:blue", lw=5, solid_capstyle="butt",
            label=f"{level:.0%} equal-tailed ({main}) [{eq[0]:.3f}, {eq[1]:.3f}]")
    ax.plot([np.median(x)], [y], "o", color="white", mec="tab:blue", ms=6)
    y -= step
    ax.plot(h, [y, y], color="tab:green", lw=5, solid_capstyle="butt",
            label=f"{level:.0%} HDI ({main}) [{h[0]:.3f}, {h[1]:.3f}]")
    for i, (lab, xi) in enumerate(others, 1):
        if xi.size == 0:
            continue
        y -= step
        e = np.ravel(equal_tailed(xi[:, None], level))
        ax.plot(e, [y, y], color=colors[i % 4], lw=5, solid_capstyle="butt",
                label=f"{level:.0%} equal-tailed ({lab}) [{e[0]:.3f}, {e[1]:.3f}]")
        ax.plot([np.median(xi)], [y], "o", color="white", mec=colors[i % 4], ms=6)
    ax.set_ylim(y - step, 1.08 * ymax)
    ax.set_yticks([v for v in ax.get_yticks() if 0 <= v <= 1.08 * ymax])
    ax.axhline(0, color="0.6", lw=0.6)
    ax.set_xlabel(names[j])
    ax.set_ylabel("posterior density")
    lab = attrs.get("labels")
    ax.set_title(title or f"{names[j]}: finite-pool posterior vs CLT interval"
                 + (f" after {lab} labels" if lab is not None else ""), fontsize=10)
    ax.legend(fontsize=7, loc="upper left", framealpha=0.9)
    fig.tight_layout()
    return _finish(fig, path)


_NUM = re.compile(r"@([-+0-9.eE]+)")


def _curve_parts(names):
    prec = [i for i, n in enumerate(names) if n.startswith("precision@")]
    rec = [i for i, n in enumerate(names) if n.startswith("recall@")]
    if not prec or len(prec) != len(rec):
        raise ValueError("plot_pr_band needs the components of a pr_curve measure (precision@τ and recall@τ)")
    thr = np.asarray([float(_NUM.search(names[i]).group(1)) for i in prec])
    return np.asarray(prec), np.asarray(rec), thr


def plot_pr_band(obj, estimate=None, clt=None, *, truth=None, level: float = 0.95, path=None, n_curves: int = 60,
                 seed: int = 0, title: str | None = None):
    """A precision–recall curve with its Bayesian band and its CLT band.

    Three panels: precision and recall against the threshold τ, each with the pointwise
    Bayesian equal-tailed band (shaded), the CLT band (dashed, 001 §3.3.2), the
    importance-weighted estimate and the truth where known; and the curve in PR space,
    with posterior draws of the whole curve (the posterior of a vector measure is a
    distribution over curves), the estimated and the true curve.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData
        Whose G contains the components of a :func:`bayes_eval.measures.pr_curve`
        (other components are ignored).
    estimate, clt, truth : full-length (m) arrays as in :func:`~bayes_eval.report.summary_table`.
    level : float
    path : str, optional
    n_curves : int, default 60
        Posterior curves drawn in the PR-space panel.
    seed : int
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _pyplot()
    values, names, attrs = g_draws(obj)
    flat = values.reshape(-1, len(names))
    ip, ir, thr = _curve_parts(names)
    order = np.argsort(thr)
    ip, ir, thr = ip[order], ir[order], thr[order]
    m = len(names)
    est, clo, chi = clt_arrays(m, estimate, clt)
    t = None if truth is None else np.asarray(truth, dtype=np.float64).reshape(-1)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for ax, idx, lab in ((axes[0], ip, "precision"), (axes[1], ir, "recall")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, hi = (np.asarray(v) for v in equal_tailed(flat[:, idx], level))
            med = np.nanmedian(flat[:, idx], axis=0)
        ax.fill_between(thr, lo, hi, color="tab:blue", alpha=0.3, step=None, label=f"Bayes {level:.0%} band")
        ax.plot(thr, med, color="tab:blue", lw=1.2, label="posterior median")
        if np.isfinite(clo[idx]).any():
            ax.plot(thr, np.clip(clo[idx], -0.05, 1.05), color="tab:orange", ls="--", lw=1.2,
                    label=f"CLT {level:.0%} band")
            ax.plot(thr, np.clip(chi[idx], -0.05, 1.05), color="tab:orange", ls="--", lw=1.2)
        if np.isfinite(est[idx]).any():
            ax.plot(thr, est[idx], color="tab:orange", lw=1.6, label="estimate (IS)")
        if t is not None:
            ax.plot(thr, t[idx], color="black", ls=":", lw=1.5, label="truth")
        ax.set_xlabel("threshold τ on the score")
        ax.set_ylabel(lab)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=7.5, loc="best")
    ax = axes[2]
    rng = np.random.default_rng(seed)
    pick = rng.choice(flat.shape[0], size=min(n_curves, flat.shape[0]), replace=False)
    for i, d in enumerate(pick):
        ax.plot(flat[d, ir], flat[d, ip], color="tab:blue", alpha=0.12, lw=0.8,
                label="posterior draws of the curve" if i == 0 else None)
    if np.isfinite(est[ip]).any():
        ax.plot(est[ir], est[ip], color="tab:orange", lw=1.8, label="estimate (IS)")
    if t is not None:
        ax.plot(t[ir], t[ip], color="black", ls=":", lw=1.8, label="truth")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.05)
    ax.legend(fontsize=7.5, loc="lower left")
    lab = attrs.get("labels")
    fig.suptitle(title or f"PR curve: Bayesian band ({attrs.get('model')}, {attrs.get('method')}) vs CLT band"
                 + (f", {lab} labels" if lab is not None else ""), fontsize=11)
    fig.tight_layout()
    return _finish(fig, path)


def plot_ppc(obj, *, alpha: float = 0.05, path=None, title: str | None = None):
    """Posterior predictive check plot: observed vs replicated label counts per stratum.

    Top: for each labeled stratum (x: stratum, in score order), the observed share of
    positives among its labeled items (dots; red when flagged) against the central
    1 − alpha posterior predictive interval of that share (bars) and its mean.
    Bottom: min(P(rep ≥ obs), P(rep ≤ obs)) per stratum on a log scale, with the flag
    line at alpha / 2.  Marker size grows with the labels in the stratum.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData
    alpha : float, default 0.05
    path : str, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    plt = _pyplot()
    df = ppc_table(obj, alpha)
    attrs = g_draws(obj)[2]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    if df.empty:
        ax1.text(0.5, 0.5, "no labeled strata", ha="center", transform=ax1.transAxes)
        return _finish(fig, path)
    for y in df["class"].unique():
        d = df[df["class"] == y]
        n = d["n_labeled"].to_numpy().astype(float)
        xk = d["stratum"].to_numpy()
        ax1.vlines(xk, d["pred_lower"] / n, d["pred_upper"] / n, color="tab:blue", alpha=0.45, lw=2.5,
                   label=f"predictive {1 - alpha:.0%} interval" if y == df["class"].iloc[0] else None)
        ax1.plot(xk, d["pred_mean"] / n, "_", color="tab:blue", ms=7,
                 label="predictive mean" if y == df["class"].iloc[0] else None)
        size = 8 + 40 * np.sqrt(n / n.max())
        col = np.where(d["flag"], "tab:red", "black")
        ax1.scatter(xk, d["observed"] / n, s=size, c=col, zorder=3,
                    label="observed share (red: flagged)" if y == df["class"].iloc[0] else None)
        tp = np.minimum(d["p_ge"], d["p_le"]).clip(lower=1e-4)
        ax2.scatter(xk, tp, s=size, c=col)
    ax2.axhline(alpha / 2, color="tab:red", ls="--", lw=1, label=f"flag at {alpha / 2:g}")
    ax2.set_yscale("log")
    ax2.set_ylim(5e-5, 1.5)
    ax2.set_ylabel("min tail prob.")
    ax2.set_xlabel("stratum (score order)")
    ax2.legend(fontsize=8, loc="lower left")
    ax1.set_ylabel("share of class" + (" 1 (positives)" if set(df["class"]) == {1} else ""))
    ax1.set_ylim(-0.03, 1.03)
    ax1.legend(fontsize=8, loc="upper left")
    nflag = int(df["flag"].sum())
    lab = attrs.get("labels")
    ax1.set_title(title or (f"Posterior predictive check ({attrs.get('model')}, {attrs.get('method')}"
                            + (f", {lab} labels" if lab is not None else "")
                            + f"): {nflag} of {len(df)} strata flagged, p(χ²) = {df.attrs['ppp_chi2']:.2f}"),
                  fontsize=10)
    fig.tight_layout()
    return _finish(fig, path)


# --------------------------------------------------------------------------------------
# A labeling session's figures (Figure + Agg canvas, no pyplot state)
# --------------------------------------------------------------------------------------
def _agg_figure(figsize):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save_png(fig, path):
    """The path written, or the Figure itself when ``path`` is None."""
    if path is None:
        return fig
    fig.savefig(path, format="png")
    return path


def measure_range(session, component: str):
    """(low, high) of a component of one of the catalogue's bounded measures, else None
    (:func:`bayes_eval.measures.component_range`)."""
    from .measures import component_range

    return component_range(session.measures, component)


def _labels_text(n) -> str:
    return f"{n} label" + ("" if n == 1 else "s")


def plot_progress(session, path: str | None = None, components=None, level: float = 0.95,
                  bayesian: bool = False):
    """Estimate, CLT interval (shaded) and confidence sequence (dashed) against labels spent,
    for :meth:`Session.plot_progress <bayes_eval.session.Session.plot_progress>`.

    Parameters
    ----------
    session : Session
        Read through ``components``, ``history``, ``measures``, ``design_name``,
        ``oracle``, ``n_stages`` and ``bayesian_interval``.
    path : str, optional
        Where to write the PNG.
    components : list of str, optional
        Default: the first component; at most four are drawn.
    level : float, default 0.95
    bayesian : bool, default False
        Add the current Bayesian interval (deterministic oracle, designs with an oracle
        model) at the labels spent.

    Returns
    -------
    str or matplotlib.figure.Figure
        The path written, or the Figure when ``path`` is None.

    Raises
    ------
    SessionError
        For a component the session does not have.
    """
    names = session.components
    comps = list(components) if components is not None else [names[0]]
    unknown = [c for c in comps if c not in names]
    if unknown:
        raise SessionError(f"unknown components {unknown}; the session has {names[:8]}...")
    h = session.history(level)
    n_labels = int(h["labels"].iloc[-1]) if len(h) else 0  # labels in the estimate (closed stages)
    fig = _agg_figure((7, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    for c in comps[:4]:
        d = h[h["component"] == c]
        if d.empty:
            continue
        line = ax.plot(d["labels"], d["estimate"], marker="o", ms=3, label=f"{c} (estimate)")[0]
        lo, hi = d["lower"].to_numpy(float), d["upper"].to_numpy(float)
        bounds = measure_range(session, c)
        note = ""
        if bounds is not None:  # a bounded measure: the normal interval's tails beyond the range are impossible
            note = f", clipped to [{bounds[0]:g}, {bounds[1]:g}]" if np.any(lo < bounds[0]) or np.any(hi > bounds[1]) \
                else ""
            lo, hi = np.clip(lo, *bounds), np.clip(hi, *bounds)
        ax.fill_between(d["labels"].to_numpy(float), lo, hi, color=line.get_color(), alpha=0.2,
                        label=f"{int(level * 100)}% CLT interval{note}")
        if "cs_lower" in d and np.isfinite(d["cs_lower"].to_numpy(float)).any():
            # the confidence sequence: the interval read first, and stopped on, where the CLT check passes
            x = d["labels"].to_numpy(float)
            for col, lab in (("cs_lower", f"{int(level * 100)}% confidence sequence (for stopping)"), ("cs_upper", None)):
                ax.plot(x, d[col].to_numpy(float), ls="--", lw=1, color=line.get_color(), label=lab)
    if bayesian and session.n_stages:
        b = session.bayesian_interval(level)  # None where there is no posterior
        if b is not None:
            for c in comps[:4]:
                r = b[b["component"] == c]
                if len(r) and np.isfinite(r["lower"].iloc[0]):
                    ax.errorbar([n_labels * 1.01], [r["estimate"].iloc[0]],
                                yerr=[[r["estimate"].iloc[0] - r["lower"].iloc[0]],
                                      [r["upper"].iloc[0] - r["estimate"].iloc[0]]],
                                fmt="s", color="black", capsize=4,
                                label=f"posterior median (■) and {int(level * 100)}% Bayesian interval, now")
    if n_labels:   # the whole labeling run, also where the estimate is undefined at every stage (0/0)
        ax.set_xlim(0, n_labels * 1.05)
    ax.set_xlabel("labels spent")
    ax.set_ylabel("estimate")
    ax.set_title(f"{', '.join(comps[:4])} — design {session.design_name}, {_labels_text(n_labels)}")
    ax.grid(alpha=0.3)
    if h.shape[0]:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _save_png(fig, path)


def session_posterior_view(draws, intervals, estimate):
    """The x-range of ``posterior.png``: the intervals and the estimate with half their span
    on either side (at least 1% of it, 0.005 where they are one point), cut to the draws'
    range.  A finite-pool posterior can have a long thin tail -- a completion with several
    hidden positives -- that would squeeze the intervals into one bin at the edge; the
    tail left out is named instead.  A posterior that is one point (every draw the
    same: the value is exact) is shown with the same margin on either side of it and of the
    lines.  Returns (lo, hi, note), ``note`` '' when no draw is left out."""
    d = np.asarray(draws, np.float64)
    pts = [v for iv in intervals for v in iv] + ([estimate] if np.isfinite(estimate) else [])
    point = bool(d.size and d.min() == d.max())
    if not pts and not point:
        return float(d.min()), float(d.max()), ""
    a, b = min(pts + [float(d[0])] * point), max(pts + [float(d[0])] * point)
    pad = max(0.5 * (b - a), 0.01 * max(abs(a), abs(b)), 0.005)
    if point:   # cut to the draws' range, the view was one value wide (matplotlib: identical xlims)
        return a - pad, b + pad, ""
    lo, hi = max(float(d.min()), a - pad), min(float(d.max()), b + pad)
    lo, hi = min(lo, a), max(hi, b)
    lo, hi = lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo)   # an interval's end is never on the frame
    below, above = float(np.mean(d < lo)), float(np.mean(d > hi))
    parts = [f"{100 * below:.1f}% of draws below {lo:.3f} (down to {d.min():.3f})" if below > 0 else "",
             f"{100 * above:.1f}% above {hi:.3f} (up to {d.max():.3f})" if above > 0 else ""]
    note = "; ".join(p for p in parts if p)
    return lo, hi, (f"not shown: {note}" if note else "")


def plot_session_posterior(session, path: str | None, level: float = 0.95):
    """The finite-pool posterior of a session's first component with its Bayesian and CLT
    intervals and the session's estimate (``posterior.png`` of ``bayes-eval session
    report``).

    Parameters
    ----------
    session : Session
        Read through ``posterior``, ``intervals``, ``estimate``, ``components``,
        ``design_name`` and ``snapshots``.
    path : str or None
        Where to write the PNG (None: return the Figure).
    level : float, default 0.95

    Returns
    -------
    str, matplotlib.figure.Figure or None
        None when the session has no posterior or no finite draw of the component.
    """
    draws = session.posterior()
    if draws is None:
        return None
    comp = session.components[0]
    d = draws[:, 0]
    d = d[np.isfinite(d)]
    if d.size == 0:
        return None
    iv = session.intervals(level, bayesian=True)
    snaps = session.snapshots()
    n_labels = int(snaps[-1].labels) if snaps else 0  # labels in the estimate (closed stages)
    lvl = int(round(level * 100))
    lines = {}
    for kind in ("bayes", "clt"):
        r = iv[(iv["component"] == comp) & (iv["kind"] == kind)]
        if len(r) and np.isfinite(r["lower"].iloc[0]) and np.isfinite(r["upper"].iloc[0]):
            lines[kind] = (float(r["lower"].iloc[0]), float(r["upper"].iloc[0]))
    est = float(session.estimate().iloc[0])
    lo, hi, clipped = session_posterior_view(d, list(lines.values()), est)
    fig = _agg_figure((7, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    exact = d.min() == d.max()   # one value: a bar as wide as the frame said nothing; a point does
    # a stochastic oracle's posterior is of the oracle's expected answer (posterior.complete_pool_draws)
    what = ("posterior of the expected answer" if getattr(session, "oracle", "deterministic") == "stochastic"
            else "finite-pool posterior")
    if exact:
        ax.vlines(d[0], 0, 1, color="#7a9cc6", lw=4, alpha=0.8, label=f"{what}: exactly {d[0]:.4f}")
        ax.plot([d[0]], [1.0], "o", color="#1f3a5f", ms=7, zorder=5)
        ax.set_ylim(0, 1.08)
    else:
        shown = d[(d >= lo) & (d <= hi)]
        ax.hist(shown, bins=_bins(shown) if shown.size > 1 else 1, density=False,
                weights=np.full(shown.size, 1.0 / d.size), color="#7a9cc6", alpha=0.8,
                label=f"{what} (share of draws)")
    styles = {"bayes": ("-", "#1f3a5f", 1.8, "Bayesian"), "clt": ("--", "#c0392b", 1.2, "CLT")}
    for kind, (a, b) in lines.items():
        ls, color, lw, name = styles[kind]
        for j, v in enumerate((a, b)):
            ax.axvline(v, ls=ls, color=color, lw=lw, zorder=3 if kind == "clt" else 2,
                       label=f"{lvl}% {name} interval [{a:.4f}, {b:.4f}]" if j == 0 else None)
    if np.isfinite(est):
        kind = "Poisson-design estimate" if session.design_name in ("poisson", "poisson-adaptive") else "IS estimate"
        ax.axvline(est, ls=":", color="#e67e22", lw=2, zorder=4, label=f"{kind} {est:.4f}")
    ax.set_xlim(lo, hi)
    ax.set_xlabel(comp)
    ax.set_ylabel("share of posterior draws")
    title = f"posterior of {comp} on this pool after {_labels_text(n_labels)}"
    if exact:
        title += "\nexact: every item that can change the measure is labeled"
    if clipped:
        title += "\n" + clipped
    ax.set_title(title, fontsize=10 if clipped or exact else None)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save_png(fig, path)


def plot_pr_curve(table, path: str | None, level: float = 0.95, title: str = "PR curve", caveat: str | None = None):
    """A precision–recall curve with its bands (``pr_curve.png`` of ``bayes-eval session
    report``), in two panels: the curve in PR space with the band of the precision, and the
    recall against the threshold with its band (the curve's uncertainty along the recall axis,
    the larger one where positives may hide among the low scores).

    Each panel shows the design's estimate with its CLT band and, where the table has them,
    the posterior's curve (the finite-pool posterior's medians) with its Bayesian band,
    shaded (the CLT band then dashed); an estimate undefined at every threshold (a Poisson
    design's curve, which only the posterior gives) leaves the posterior's curve alone.  ``caveat``: a second title line (the report's: where
    the session's CLT check fails, the CLT band rests on the positives found).

    Parameters
    ----------
    table : pandas.DataFrame
        One row per threshold, columns ``threshold``, ``recall``, ``precision``,
        ``precision_lower``, ``precision_upper``, ``recall_lower``, ``recall_upper`` and
        optionally the Bayesian ``{precision,recall}_bayes_{median,lower,upper}``; rows with an
        undefined precision or recall are left out of the first panel.
    path : str or None
        Where to write the PNG (None: return the Figure).
    level : float, default 0.95
        The level of the bands (for the legend).
    title : str

    Returns
    -------
    str or matplotlib.figure.Figure
    """
    fig = _agg_figure((11, 5))
    ax, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    pct = int(round(level * 100))
    bayes = "precision_bayes_lower" in table.columns
    est_color, post_color, band_color = "#1f3a5f", "#a0521a", "#d9822b"

    def bands(axis, x, lo, hi, xb, med, blo, bhi, what, est_x, est_y):
        # no estimate at all (a Poisson design's further measure): the posterior's curve alone
        has_est = bool(np.isfinite(np.asarray(est_y, float)).any())
        if has_est:
            axis.plot(est_x, est_y, marker=".", ms=3 if bayes else None, color=est_color,
                      label="design's estimate" if bayes else "estimate")
        if bayes:
            axis.fill_between(xb, blo, bhi, alpha=0.3, color=band_color, lw=0, label=f"{pct}% Bayesian band ({what})")
            axis.plot(xb, med, color=post_color, lw=1.2, label="posterior median")
            if has_est:
                axis.plot(x, lo, color=est_color, lw=0.8, ls="--", label=f"{pct}% CLT band ({what})")
                axis.plot(x, hi, color=est_color, lw=0.8, ls="--")
        else:
            axis.fill_between(x, lo, hi, alpha=0.25, color=est_color, label=f"{pct}% CLT band ({what})")

    def col(d, name):
        return np.clip(d[name].to_numpy(float), 0, 1)

    # PR space, at each curve's own recall
    ok = np.isfinite(table["precision"]) & np.isfinite(table["recall"])
    d = table[ok].sort_values("recall", kind="stable")
    if not len(d) and not bayes:
        raise ValueError("plot_pr_curve: no threshold has both a precision and a recall to draw")
    b = None
    if bayes:
        b = table[np.isfinite(table["precision_bayes_median"]) & np.isfinite(table["recall_bayes_median"])]
        b = b.sort_values("recall_bayes_median", kind="stable")
    bands(ax, d["recall"].to_numpy(float), col(d, "precision_lower"), col(d, "precision_upper"),
          None if b is None else b["recall_bayes_median"].to_numpy(float),
          None if b is None else b["precision_bayes_median"].to_numpy(float),
          None if b is None else b["precision_bayes_lower"].to_numpy(float),
          None if b is None else b["precision_bayes_upper"].to_numpy(float), "precision",
          d["recall"].to_numpy(float), d["precision"].to_numpy(float))
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_title(title if not caveat else f"{title}\n{caveat}", fontsize=None if not caveat else 9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    # the recall against the threshold
    t = np.asarray(table["threshold"], dtype=float)
    o = np.argsort(t, kind="stable")
    tt = table.iloc[o]
    ts = t[o]
    bands(ax2, ts, col(tt, "recall_lower"), col(tt, "recall_upper"), ts,
          tt["recall_bayes_median"].to_numpy(float) if bayes else None,
          tt["recall_bayes_lower"].to_numpy(float) if bayes else None,
          tt["recall_bayes_upper"].to_numpy(float) if bayes else None, "recall", ts, tt["recall"].to_numpy(float))
    ax2.set_xlabel("threshold (score)")
    ax2.set_ylabel("recall")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("recall at each threshold", fontsize=None if not caveat else 9)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return _save_png(fig, path)
