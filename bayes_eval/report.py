"""Bayesian and CLT intervals side by side: the finite-pool posterior of G in ArviZ.

The CLT interval of 001 §3.3.2 rests on the importance-weighted estimate and the delta
method; it is asymptotic and can be poor after few labels on an imbalanced pool.  The
Bayesian alternative (001 §4; ``docs/architecture.md``, "Intervals") is the posterior of the measure *on
this pool* (001 Remark 2): for every posterior draw of an oracle model (001 §4), the
unlabeled items' classes are drawn as counts per cell, the pool is completed with the
labels already known, and G is computed exactly (:mod:`bayes_eval.posterior`).  Because
every design here chooses items from scores and labels already seen, the observation
process is ignorable (001 §4.2) and the posterior holds whatever design chose the items.

This module runs that posterior with full diagnostics and reports it:

* :func:`fit_finite_pool` — the posterior on a cell table, for the ``"calibrated"``
  Beta-binomial model (``models/calibrated.py``; the default, because the Dirichlet-tree
  posterior is improper-like in sparsely labeled strata — see that module's docstring)
  or the ``"dirichlet-tree"`` of 001 §4 (``models/tree.py``), by
  ``method="nuts"`` (the models' NUTS in NumPyro, several chains, so that R-hat is
  defined) or ``method="fast"`` (the samplers the simulation core uses: Laplace-t
  importance resampling for the calibrated model, the conjugate Gibbs sampler for the
  tree; several independent runs as chains).
* :func:`to_inference_data` — an :class:`arviz.InferenceData` with groups
  ``posterior`` (model parameters, π per stratum, G), ``posterior_predictive``
  (replicated label counts of the labeled items, unlabeled class counts per stratum,
  G), ``observed_data`` (label counts per stratum), ``sample_stats`` (NUTS only:
  divergences, tree depth, step size, energy, ...) and ``constant_data`` (stratum
  sizes, classifier probabilities, prior).  ``arviz.summary`` works on it.
* :func:`summary_table` — per component of G: the importance-weighted estimate and its
  CLT interval (passed in), the Bayesian equal-tailed and highest-density (``arviz.hdi``)
  intervals, their widths, R-hat, ESS and the labels spent; :data:`TABLE_COLUMNS`.
* :func:`ppc_table` — a posterior predictive check of the observed positives per
  stratum: where the model cannot reproduce them, it is misspecified.  It, :func:`hdi`
  and the readers of a fit or an InferenceData live in :mod:`bayes_eval.summaries`.
* :func:`plot_density`, :func:`plot_pr_band`, :func:`plot_ppc` — the posterior density
  of a component with the CLT interval and the estimate overlaid; a PR curve with
  Bayesian and CLT bands; the predictive check.  They live in :mod:`bayes_eval.plots`
  (re-exported here, and methods of :class:`PosteriorReport`).
* :func:`posterior_report` (pool, measure, labeled items, labels) and
  :func:`report_from_session` (a :class:`~bayes_eval.session.Session`) — everything at
  once, as a :class:`PosteriorReport`.

Examples
--------
>>> rep = posterior_report(pool, M.f1(), items, labels, estimate=est,    # doctest: +SKIP
...                        clt=(lo, hi), model="calibrated", method="nuts")
>>> rep.table                                                           # doctest: +SKIP
>>> az.summary(rep.idata, var_names=["a", "b", "kappa", "G"])           # doctest: +SKIP
>>> rep.plot_density(path="f1.png"); rep.plot_ppc(path="ppc.png")      # doctest: +SKIP
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from . import _config  # noqa: F401
from .cells import CellTable
from .models.posterior_samplers import CalibratedSampler  # noqa: F401  (re-exported)
from .models.registry import POSTERIOR_SAMPLERS, posterior_sampler
from .posterior import (
    equal_tailed,
    labeled_table,
    leaf_counts,
    pool_posterior_from_pi,
    replicate_labeled,
)
from .summaries import PPC_COLUMNS, clt_arrays, g_draws, hdi, ppc_table  # noqa: F401  (re-exported)
from .plots import plot_density, plot_ppc, plot_pr_band  # noqa: F401  (re-exported: the figures live in plots)

__all__ = [
    "MODELS",
    "METHODS",
    "TABLE_COLUMNS",
    "PPC_COLUMNS",
    "FinitePoolFit",
    "PosteriorReport",
    "fit_finite_pool",
    "to_inference_data",
    "summary_table",
    "ppc_table",
    "hdi",
    "plot_density",
    "plot_pr_band",
    "plot_ppc",
    "posterior_report",
    "report_from_session",
]

#: the oracle models with a full-posterior sampler (``bayes_eval.models.registry.POSTERIOR_SAMPLERS``)
MODELS = tuple(POSTERIOR_SAMPLERS)
METHODS = ("nuts", "fast")

#: Columns of :func:`summary_table`, in order (``truth`` and the ``*_covers`` columns
#: only when the truth is given).
TABLE_COLUMNS = (
    "component",  # name of the component of G
    "model",  # oracle model of the posterior
    "method",  # "nuts" or "fast"
    "labels",  # labels spent (distinct labeled items)
    "estimate",  # the importance-weighted (CLT) point estimate passed in
    "clt_lower", "clt_upper", "clt_width",  # CLT interval (001 §3.3.2), passed in
    "post_mean", "post_median",  # posterior mean and median of G on the pool
    "eq_lower", "eq_upper", "eq_width",  # equal-tailed posterior interval
    "hdi_lower", "hdi_upper", "hdi_width",  # highest-density interval (arviz.hdi)
    "r_hat", "ess_bulk", "ess_tail",  # ArviZ diagnostics of the draws of G
)


_NUTS_FIELDS = ("diverging", "num_steps", "energy", "potential_energy", "accept_prob", "adapt_state.step_size")


# --------------------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FinitePoolFit:
    """Draws of the finite-pool posterior of G with everything needed to report them.

    Every array with draws has leading axes (chain, draw).

    Attributes
    ----------
    model, method : str
        See :data:`MODELS`, :data:`METHODS`.
    names : tuple of str
        The m components of G.
    value : numpy.ndarray, shape (chain, draw, m)
        G on the completed pool.
    params : dict of str to numpy.ndarray
        Model parameters: ``a``, ``b``, ``kappa``, ``log_kappa`` (calibrated) or
        ``theta`` (chain, draw, C) and ``phi`` (chain, draw, C, node, branch)
        (Dirichlet-tree, nodes in breadth-first order).
    pi : numpy.ndarray, shape (chain, draw, K, C)
        π(y|k) of every stratum: the item-weighted mean of the class rates of its
        posterior units (the calibrated model's units are cells,
        :func:`bayes_eval.cells.posterior_units`; 1/C for a stratum without items).
    unlabeled_counts : numpy.ndarray, shape (chain, draw, K, C)
        Drawn classes of the unlabeled items per stratum.
    replicated_counts : numpy.ndarray, shape (chain, draw, K, C)
        Posterior predictive replicates of the labeled items' classes per stratum.
    observed_counts : numpy.ndarray, shape (K, C)
        Labeled items per stratum and class.
    unlabeled : numpy.ndarray, shape (K,)
    strata_sizes : numpy.ndarray, shape (K,)
    leaf_probs : numpy.ndarray, shape (K, C)
        The classifier's mean class probabilities per stratum (001 §5.2).
    prior : dict
        Prior hyperparameters (constant data).
    dims, coords : dict
        ArviZ dims of the model's parameters and prior (``params`` / ``prior_<name>``),
        and the coordinates they need beyond stratum and class (from the model's
        posterior sampler, ``models/posterior_samplers.py``).
    sample_stats : dict or None
        NUTS per-draw statistics, (chain, draw) each.
    seconds : float
        Wall time of the fit (compilation included).
    info : dict
        Extra facts (tree shape, importance ESS of the fast calibrated route, ...).
    """

    model: str
    method: str
    names: tuple
    value: np.ndarray
    params: dict
    pi: np.ndarray
    unlabeled_counts: np.ndarray
    replicated_counts: np.ndarray
    observed_counts: np.ndarray
    unlabeled: np.ndarray
    strata_sizes: np.ndarray
    leaf_probs: np.ndarray
    prior: dict
    sample_stats: dict | None
    seconds: float
    info: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    coords: dict = field(default_factory=dict)

    @property
    def n_labels(self) -> int:
        """Labels spent: distinct labeled items."""
        return int(round(float(self.observed_counts.sum())))

    @property
    def n_chains(self) -> int:
        return int(self.value.shape[0])

    @property
    def n_draws(self) -> int:
        return int(self.value.shape[1])


def _as_measure(measure):
    from . import measures as M

    if isinstance(measure, M.Measure):
        return measure
    if isinstance(measure, str):
        parts = [p.strip() for p in measure.split(",") if p.strip()]
        ms = [M.get(p) for p in parts]
        return ms[0] if len(ms) == 1 else M.stack(*ms)
    if isinstance(measure, (list, tuple)):
        ms = [_as_measure(m) for m in measure]
        if not ms:
            raise ValueError("need at least one measure")
        return ms[0] if len(ms) == 1 else M.stack(*ms)
    raise TypeError(f"expected a Measure, a measure name or a list of them, got {type(measure).__name__}")


def _check_choice(name, value, options):
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")


_pool_posterior_jit = jax.jit(pool_posterior_from_pi, static_argnums=(1, 5, 6))
_replicate_jit = jax.jit(replicate_labeled)


def _grouped(x, n_chains):
    x = np.asarray(x)
    return x.reshape((n_chains, -1) + x.shape[1:])


def _nuts_stats(mcmc) -> dict:
    ef = mcmc.get_extra_fields(group_by_chain=True)
    out = {"diverging": np.asarray(ef["diverging"]).astype(bool)}
    if "num_steps" in ef:
        n = np.asarray(ef["num_steps"]).astype(np.int64)
        out["n_steps"] = n
        # as arviz.from_numpyro: a trajectory of n leapfrog steps has depth floor(log2 n) + 1
        out["tree_depth"] = (np.floor(np.log2(np.maximum(n, 1))) + 1).astype(np.int64)
    if "energy" in ef:
        out["energy"] = np.asarray(ef["energy"])
    if "potential_energy" in ef:
        out["lp"] = -np.asarray(ef["potential_energy"])
    if "accept_prob" in ef:
        out["acceptance_rate"] = np.asarray(ef["accept_prob"])
    if "adapt_state.step_size" in ef:
        out["step_size"] = np.asarray(ef["adapt_state.step_size"])
    return out


def fit_finite_pool(
    cells: CellTable,
    labeled,
    n_strata: int,
    measure,
    *,
    model: str = "calibrated",
    method: str = "nuts",
    leaf_probs=None,
    depth: int = 8,
    branching: int | None = None,
    strength: float = 1.0,
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 1000,
    thin: int = 5,
    n_proposals: int = 4096,
    chain_method: str = "vectorized",
    seed: int = 0,
    nuts_kwargs: dict | None = None,
    sampler: CalibratedSampler | None = None,
    observations: bool = False,
) -> FinitePoolFit:
    """The finite-pool posterior of G given labeled items, with diagnostics.

    Parameters
    ----------
    cells : CellTable
        The pool as cells (:func:`bayes_eval.cells.build_cells`) for ``measure``: every
        item of a cell shares the stratum and the loss row ℓ(x, ·).
    labeled : array, shape (X, C)
        Labeled items per cell and class (:func:`bayes_eval.posterior.labeled_table`).
    n_strata : int
        K, the strata (tree leaves) of ``cells.stratum``.
    measure : Measure, str or list
        The measure G = g(R) (001 §2.2); a list is stacked into one vector measure.
        ``cells`` must have been built for it.
    model : {"calibrated", "dirichlet-tree"}, default "calibrated"
        The oracle model: the calibrated Beta-binomial (binary pools only) or the
        Dirichlet-tree of 001 §4 with 001 §5.2 hyperparameters.
    method : {"nuts", "fast"}, default "nuts"
        ``"nuts"``: NUTS in NumPyro with ``num_chains`` chains of ``num_warmup`` +
        ``num_samples`` iterations — the tree's ``run_nuts`` (chains started near the
        EM mode with jitter), the calibrated model's ``numpyro_model`` (see
        ``_calibrated_nuts``); R-hat, ESS and divergences are meaningful.
        ``"fast"``: the samplers of the simulation core — for the calibrated model
        Laplace-t importance resampling with ``n_proposals`` proposals (the draws are
        resampled, so duplicates lower their ESS), for the tree the conjugate Gibbs
        sampler, every chain started at the EM mode, ``num_warmup`` sweeps then every
        ``thin``-th of ``num_samples * thin``; each chain an independent run, so R-hat
        compares runs rather than dispersed starting points.
    leaf_probs : array, shape (K, C), optional
        s(y|k); default :func:`bayes_eval.cells.leaf_probs` of ``cells``.  Given, the
        model's units are the strata; by default the calibrated model's are the cells
        (:func:`bayes_eval.cells.posterior_units`).
    depth, branching, strength : tree shape and prior strength (Dirichlet-tree only).
    num_chains, num_warmup, num_samples, thin, n_proposals : sampler settings.
    chain_method : {"vectorized", "sequential", "parallel"}, default "vectorized"
        How NumPyro runs the NUTS chains.  "vectorized" compiles the sampler once for
        all chains; "sequential" compiles it again for every chain, which dominated
        the run time of the three-parameter calibrated model; "parallel" needs one JAX
        device per chain.
    seed : int
        Seeds everything: equal seeds give equal draws.
    nuts_kwargs : dict, optional
        Passed to ``numpyro.infer.NUTS``.  For the calibrated model the defaults are
        ``dense_mass=True, target_accept_prob=0.9`` (three parameters, a and b strongly
        correlated); the tree uses NumPyro's defaults.
    sampler : CalibratedSampler, optional
        Reuses its compiled NUTS samplers across calls (calibrated model, ``method="nuts"``).
    observations : bool, default False
        A stochastic oracle (001 §2.1): ``labeled`` counts label observations (a cell's draws,
        repeats included), and G is of the oracle's expected answer -- no unlabeled items to
        complete (:func:`bayes_eval.posterior.complete_pool_draws`).

    Returns
    -------
    FinitePoolFit
    """
    _check_choice("model", model, MODELS)
    _check_choice("method", method, METHODS)
    if num_chains < 1 or num_samples < 1:
        raise ValueError(f"need num_chains >= 1 and num_samples >= 1, got {num_chains}, {num_samples}")
    measure = _as_measure(measure)
    labeled = jnp.asarray(labeled, dtype=jnp.float64)
    c = cells.n_classes
    if labeled.shape != (cells.n_cells, c):
        raise ValueError(f"labeled must have shape (X, C) = ({cells.n_cells}, {c}), got {labeled.shape}")
    if measure.n_classes != c:
        raise ValueError(f"the measure has {measure.n_classes} classes, the cells {c}")
    if not observations and (bool(jnp.any(labeled > cells.size[:, None] + 1e-9))
                             or bool(jnp.any(labeled.sum(1) > cells.size + 1e-9))):
        raise ValueError("labeled counts exceed the items of a cell")
    draws_of = posterior_sampler(model, c)
    from .cells import leaf_probs as _lp
    from .cells import posterior_units
    from .posterior import units_for_model

    # the model's units: cells for the calibrated model unless the caller fixes the
    # strata's probabilities (``leaf_probs``), the strata otherwise
    by = "stratum" if leaf_probs is not None else units_for_model(model)
    units = posterior_units(cells, n_strata, by)
    lp = jnp.asarray(_lp(cells, n_strata) if leaf_probs is None else leaf_probs, dtype=jnp.float64)
    lp_units = lp if leaf_probs is not None else jnp.asarray(units.probs, dtype=jnp.float64)
    # a stochastic oracle's label observations: no unlabeled items to complete
    counts, unl = leaf_counts(cells, labeled, n_strata, observations)
    counts_u, unl_u = leaf_counts(units.cells, labeled, units.n_units, observations)
    sizes = jax.ops.segment_sum(cells.size, cells.stratum, num_segments=n_strata)
    key = jax.random.PRNGKey(int(seed))
    k_fit, k_pi, k_pool, k_rep = jax.random.split(key, 4)
    t0, c0 = time.perf_counter(), time.process_time()
    d = draws_of(k_fit, k_pi, lp_units, counts_u, unl_u, method=method, num_chains=int(num_chains),
                 num_warmup=int(num_warmup), num_samples=int(num_samples), thin=int(thin),
                 n_proposals=int(n_proposals), chain_method=chain_method, nuts_kwargs=dict(nuts_kwargs or {}),
                 extra_fields=_NUTS_FIELDS, sampler=sampler, depth=depth, branching=branching, strength=strength)
    info: dict[str, Any] = dict(d.info)
    stats = _nuts_stats(d.mcmc) if d.mcmc is not None else None
    params, pi_u, prior = d.params, d.pi, d.prior
    info["units"] = units.n_units

    post = _pool_posterior_jit(k_pool, measure.g, units.cells, labeled, pi_u, units.n_units, bool(observations))
    rep_u = _replicate_jit(k_rep, counts_u, pi_u)
    jax.block_until_ready((post, rep_u))
    # per stratum: counts are sums over the stratum's units; π the item-weighted mean
    to_k = jax.vmap(lambda a: jax.ops.segment_sum(a, jnp.asarray(units.stratum), num_segments=n_strata))
    rep, unl_draws = to_k(rep_u), to_k(post.unlabeled_counts)
    if by == "stratum":
        pi = pi_u
    else:
        size_u = jax.ops.segment_sum(units.cells.size, units.cells.stratum, num_segments=units.n_units)
        pi = to_k(pi_u * size_u[None, :, None]) / jnp.maximum(sizes, 1.0)[None, :, None]
        pi = jnp.where((sizes > 0)[None, :, None], pi, 1.0 / c)
    seconds = time.perf_counter() - t0
    info["cpu_seconds"] = round(time.process_time() - c0, 3)
    return FinitePoolFit(
        model=model,
        method=method,
        names=tuple(measure.names),
        value=_grouped(post.value, num_chains),
        params=params,
        pi=_grouped(pi, num_chains),
        unlabeled_counts=_grouped(unl_draws, num_chains),
        replicated_counts=_grouped(rep, num_chains),
        observed_counts=np.asarray(counts),
        unlabeled=np.asarray(unl),
        strata_sizes=np.asarray(sizes),
        leaf_probs=np.asarray(lp),
        prior=prior,
        sample_stats=stats,
        seconds=seconds,
        info=info,
        dims=dict(d.dims),
        coords=dict(d.coords),
    )


# --------------------------------------------------------------------------------------
# ArviZ
# --------------------------------------------------------------------------------------
def to_inference_data(fit: FinitePoolFit):
    """The fit as an :class:`arviz.InferenceData`.

    Groups and variables (dims in brackets; chain and draw omitted):

    ``posterior``
        calibrated: ``a``, ``b``, ``kappa``, ``log_kappa``; Dirichlet-tree: ``theta``
        [class], ``phi`` [class, node, branch] (branch probabilities of the internal
        nodes, breadth-first); both: ``pi`` [stratum, class] and ``G`` [component].
    ``posterior_predictive``
        ``label_counts`` [stratum, class] (replicated classes of the labeled items, named
        as the observation, ArviZ's convention for posterior predictive checks),
        ``unlabeled_counts`` [stratum, class], ``unlabeled_positives`` [stratum] (binary
        pools) and ``G`` [component] (G is a function of the parameters *and* of the
        drawn classes of the unlabeled items, so it is both).
    ``observed_data``
        ``label_counts`` [stratum, class].
    ``sample_stats``
        NUTS only: ``diverging``, ``tree_depth``, ``n_steps``, ``energy``, ``lp``,
        ``acceptance_rate``, ``step_size``.
    ``constant_data``
        ``strata_sizes``, ``unlabeled`` [stratum], ``classifier_probs`` [stratum, class]
        and the prior: ``prior_a``, ``prior_b``, ``prior_log_kappa`` [moment] (mean, sd)
        or ``prior_alpha`` [class], ``prior_beta`` [class, node, branch].

    Attributes (of the InferenceData and of its ``posterior`` and
    ``posterior_predictive`` groups): model, method, labels, components, seconds and the
    fit's ``info``.

    Parameters
    ----------
    fit : FinitePoolFit

    Returns
    -------
    arviz.InferenceData
    """
    import arviz as az

    k, c = fit.observed_counts.shape
    coords = {"component": list(fit.names), "stratum": np.arange(k), "class": np.arange(c)}
    dims = {"G": ["component"], "pi": ["stratum", "class"], "label_counts": ["stratum", "class"],
            "unlabeled_counts": ["stratum", "class"], "unlabeled_positives": ["stratum"],
            "strata_sizes": ["stratum"], "unlabeled": ["stratum"], "classifier_probs": ["stratum", "class"]}
    posterior = {name: np.asarray(v) for name, v in fit.params.items()}
    posterior["pi"] = fit.pi
    posterior["G"] = fit.value
    ppred = {"label_counts": fit.replicated_counts, "unlabeled_counts": fit.unlabeled_counts, "G": fit.value}
    if c == 2:
        ppred["unlabeled_positives"] = fit.unlabeled_counts[..., 1]
    constant = {"strata_sizes": fit.strata_sizes, "unlabeled": fit.unlabeled, "classifier_probs": fit.leaf_probs}
    # the model's own variables: dims and coordinates from its posterior sampler
    coords.update(fit.coords)
    dims.update(fit.dims)
    for name, v in fit.prior.items():
        constant[f"prior_{name}"] = np.asarray(v)
    attrs = {"model": fit.model, "method": fit.method, "labels": fit.n_labels, "components": list(fit.names),
             "seconds": float(fit.seconds), "inference_library": "numpyro" if fit.method == "nuts" else "jax"}
    attrs.update({k_: (v if isinstance(v, (int, float, str)) else str(v)) for k_, v in fit.info.items()})
    idata = az.from_dict(
        posterior=posterior,
        posterior_predictive=ppred,
        observed_data={"label_counts": fit.observed_counts},
        sample_stats=fit.sample_stats,
        constant_data=constant,
        coords=coords,
        dims=dims,
        attrs=attrs,
    )
    for group in ("posterior", "posterior_predictive"):
        getattr(idata, group).attrs.update(attrs)  # also on the groups: survives group-wise I/O
    return idata


# --------------------------------------------------------------------------------------
# Intervals and the side-by-side table
# --------------------------------------------------------------------------------------
def _diagnostics(values):
    """R-hat, bulk and tail ESS of each component of (chain, draw, m) draws."""
    import arviz as az

    m = values.shape[-1]
    out = np.full((m, 3), np.nan)
    for j in range(m):
        v = values[..., j]
        if not np.all(np.isfinite(v)) or np.ptp(v) == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[j] = (float(az.rhat(v)), float(az.ess(v, method="bulk")), float(az.ess(v, method="tail")))
    return out


def summary_table(obj, estimate=None, clt=None, *, truth=None, level: float = 0.95) -> pd.DataFrame:
    """Bayesian and CLT intervals side by side, one row per component of G.

    Parameters
    ----------
    obj : FinitePoolFit or arviz.InferenceData
        From :func:`fit_finite_pool` / :func:`to_inference_data`.
    estimate : array, shape (m,), optional
        The importance-weighted point estimate Ĝ (001 eq. 1).
    clt : (lower, upper), optional
        Its CLT interval (001 §3.3.2), e.g. from
        :func:`bayes_eval.estimators.normal_interval` or ``Session.summary()``.
    truth : array, shape (m,), optional
        The true value, in simulations: adds ``truth`` and coverage flags.
    level : float, default 0.95
        Level of the Bayesian intervals (the CLT interval is taken as given).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`TABLE_COLUMNS` (+ ``truth``, ``clt_covers``, ``eq_covers``,
        ``hdi_covers`` with ``truth``).  Widths are upper − lower.  R-hat and ESS are
        NaN for a component whose draws are constant (e.g. fully labeled pool).
    """
    values, names, attrs = g_draws(obj)
    m = len(names)
    flat = values.reshape(-1, m)
    est, clo, chi = clt_arrays(m, estimate, clt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(flat, axis=0)
        med = np.nanmedian(flat, axis=0)
        eq_lo, eq_hi = (np.asarray(v) for v in equal_tailed(flat, level))
    h = hdi(flat, level).reshape(m, 2)
    diag = _diagnostics(values)
    df = pd.DataFrame({
        "component": names,
        "model": attrs.get("model"),
        "method": attrs.get("method"),
        "labels": int(attrs.get("labels", 0)),
        "estimate": est,
        "clt_lower": clo,
        "clt_upper": chi,
        "clt_width": chi - clo,
        "post_mean": mean,
        "post_median": med,
        "eq_lower": eq_lo,
        "eq_upper": eq_hi,
        "eq_width": eq_hi - eq_lo,
        "hdi_lower": h[:, 0],
        "hdi_upper": h[:, 1],
        "hdi_width": h[:, 1] - h[:, 0],
        "r_hat": diag[:, 0],
        "ess_bulk": diag[:, 1],
        "ess_tail": diag[:, 2],
    })
    df.attrs["level"] = level
    if truth is not None:
        t = np.asarray(truth, dtype=np.float64).reshape(-1)
        if t.shape != (m,):
            raise ValueError(f"truth has {t.size} components, G has {m}")
        df["truth"] = t
        df["clt_covers"] = (clo <= t) & (t <= chi)
        df["eq_covers"] = (eq_lo <= t) & (t <= eq_hi)
        df["hdi_covers"] = (h[:, 0] <= t) & (t <= h[:, 1])
    return df


# --------------------------------------------------------------------------------------
# High-level entry points
# --------------------------------------------------------------------------------------
@dataclass
class PosteriorReport:
    """Everything :func:`posterior_report` computed.

    Attributes
    ----------
    fit : FinitePoolFit
    idata : arviz.InferenceData
    table : pandas.DataFrame
        :func:`summary_table`.
    ppc : pandas.DataFrame
        :func:`ppc_table`.
    estimate, clt, truth, level :
        What was passed in (for the plots).
    cells : CellTable
    item_cell : numpy.ndarray
        The cell of every item of the pool.
    """

    fit: FinitePoolFit
    idata: Any
    table: pd.DataFrame
    ppc: pd.DataFrame
    estimate: Any = None
    clt: Any = None
    truth: Any = None
    level: float = 0.95
    cells: Any = None
    item_cell: Any = None

    def summary(self, var_names=None, **kw) -> pd.DataFrame:
        """``arviz.summary`` of the posterior (default: the scalar model parameters and
        G; pass ``var_names`` for others, e.g. ``["theta", "G"]``)."""
        import arviz as az

        if var_names is None:
            var_names = [v for v in self.idata.posterior.data_vars
                         if v == "G" or self.idata.posterior[v].ndim <= 3 and v not in ("pi", "phi")]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return az.summary(self.idata, var_names=var_names, **kw)

    def plot_density(self, component=0, path=None, **kw):
        """:func:`~bayes_eval.plots.plot_density` with this report's estimate, CLT interval and truth."""
        return plot_density(self.idata, component, self.estimate, self.clt, truth=self.truth, level=self.level,
                            path=path, **kw)

    def plot_pr_band(self, path=None, **kw):
        """:func:`~bayes_eval.plots.plot_pr_band` with this report's estimate, CLT band and truth."""
        return plot_pr_band(self.idata, self.estimate, self.clt, truth=self.truth, level=self.level, path=path,
                            **kw)

    def plot_ppc(self, path=None, **kw):
        """:func:`~bayes_eval.plots.plot_ppc`."""
        return plot_ppc(self.idata, path=path, **kw)


def posterior_report(
    pool,
    measure,
    items,
    labels,
    *,
    estimate=None,
    clt=None,
    truth=None,
    level: float = 0.95,
    model: str = "calibrated",
    method: str = "nuts",
    n_strata: int = 256,
    strata_method: str = "csf",
    n_fine: int | None = None,
    keep_empty: bool = True,
    system: int = 0,
    **fit_kw,
) -> PosteriorReport:
    """The finite-pool posterior of G for a pool and its labeled items, reported.

    Stratifies the pool by score (CSF, 001 §5.2 — by default as ``run_simulation`` and
    ``Session`` do), builds the cells for ``measure``, fits the oracle model to the
    labels (:func:`fit_finite_pool`) and reports the posterior next to the CLT interval.

    Parameters
    ----------
    pool : Pool
    measure : Measure, str or list
        A list is stacked into one vector measure (one fit, G with every component).
    items : array, shape (n,)
        Ids of the labeled items (``pool.ids``); an item may repeat with the same label
        (with ``observations=True``, a stochastic oracle's: one entry per labeled draw, each
        counted, its labels free to differ).
    labels : array, shape (n,)
        Their labels.
    estimate, clt : optional
        The importance-weighted estimate and its CLT interval (lower, upper), for the
        table and the plots.
    truth : optional
        The true value (simulations only).
    level : float, default 0.95
    model, method :
        See :func:`fit_finite_pool`.
    n_strata, strata_method, n_fine, keep_empty, system :
        The score strata (:func:`bayes_eval.strata.stratify`).
    **fit_kw
        Further arguments of :func:`fit_finite_pool` (``num_chains``, ``num_samples``,
        ``seed``, ``depth``, ...).

    Returns
    -------
    PosteriorReport
    """
    from .cells import build_cells
    from .strata import stratify

    measure = _as_measure(measure)
    strata = stratify(pool, n_strata, method=strata_method, system=system, n_fine=n_fine, keep_empty=keep_empty)
    cells, item_cell = build_cells(pool, strata, measure, system=system)
    rows = pool.index_of(np.asarray(items))
    lab = labeled_table(item_cell, cells.n_cells, pool.n_classes, rows, labels,
                        observations=bool(fit_kw.get("observations")))
    fit = fit_finite_pool(cells, lab, strata.n_strata, measure, model=model, method=method, **fit_kw)
    idata = to_inference_data(fit)
    table = summary_table(fit, estimate, clt, truth=truth, level=level)
    return PosteriorReport(fit=fit, idata=idata, table=table, ppc=ppc_table(fit), estimate=estimate, clt=clt,
                           truth=truth, level=level, cells=cells, item_cell=item_cell)


def report_from_session(session, *, truth=None, level: float = 0.95, **kw) -> PosteriorReport:
    """:func:`posterior_report` for a labeling :class:`~bayes_eval.session.Session`.

    Takes the pool, the measures (stacked), the labels of the closed stages and the
    session's importance-weighted estimate and CLT interval (``Session.summary``, 001
    §3.3.2), and the session's stratification settings unless overridden in ``kw``.
    A stochastic-oracle session gives its labeled draws as observations (``observations=True``:
    the posterior of the oracle's expected answer, :func:`fit_finite_pool`).

    Parameters
    ----------
    session : Session
    truth : optional
    level : float, default 0.95
    **kw
        Passed to :func:`posterior_report` (``model``, ``method``, ``num_chains``, ...).

    Returns
    -------
    PosteriorReport
    """
    if getattr(session, "oracle", "deterministic") != "deterministic":
        kw.setdefault("observations", True)
    cfg = getattr(session, "config", {}) or {}
    for name in ("n_strata", "n_fine", "keep_empty", "strata_method", "system"):
        if name in cfg and cfg[name] is not None:
            kw.setdefault(name, cfg[name])
    summ = session.summary(level=level)
    hist = session.history(level=level)
    labs = session.labels()
    if len(hist):
        labs = labs[labs["stage"] <= int(hist["stage"].max())]
    else:
        labs = labs.iloc[:0]
    return posterior_report(
        session.pool, list(session.measures), labs["item"].to_numpy(), labs["label"].to_numpy(),
        estimate=summ["estimate"].to_numpy(), clt=(summ["clt_lower"].to_numpy(), summ["clt_upper"].to_numpy()),
        truth=truth, level=level, **kw)

