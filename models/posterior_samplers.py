"""Full-posterior samplers of the oracle models, for diagnostics (``bayes_eval.report``).

The designs use a model through its :class:`~bayes_eval.models.oracle.OracleModel`
interface (a point predictive and cheap posterior draws).  An analyst who wants to
*check* the posterior — R-hat, ESS, divergences, posterior predictive checks in ArviZ —
needs the model's parameters sampled with their sampler statistics.  Each model that
offers this has one function here, registered by name in
:data:`bayes_eval.models.registry.POSTERIOR_SAMPLERS`; the report asks the registry and
never looks at a model's name.  Every sampler returns :class:`ParameterDraws`: the
parameters by chain, the draws of π(y | stratum) they imply, the NumPyro ``MCMC`` (NUTS)
whose sampler fields become ArviZ's ``sample_stats``, and the prior with the ArviZ dims
of every variable.

* ``calibrated`` (binary): NUTS on (a, b, log κ) and the curve's band offsets of the
  Beta-binomial model with a logistic recalibration of the scores (``models/calibrated.py``), π then drawn from its
  exact Beta conditional; ``method="fast"``: the Laplace-t importance resampling of the
  simulation core.
* ``dirichlet-tree``: NUTS on the tree's θ and branch probabilities (001 §4,
  ``models/tree_nuts.py``), chains started near the EM mode with jitter;
  ``method="fast"``: the conjugate Gibbs sampler started at the EM mode.

To give another model a posterior sampler: write a function with the signature of
:func:`calibrated_draws` and add it to ``POSTERIOR_SAMPLERS`` (``tests/test_report.py``
runs every registered sampler through ``bayes_eval.report.fit_finite_pool``).
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401

__all__ = ["ParameterDraws", "CalibratedSampler", "calibrated_draws", "tree_draws", "CALIBRATED_NUTS"]

# (a, b) are strongly correlated a posteriori: a dense mass matrix doubles the ESS per
# draw, and a higher target acceptance removed the rare divergences seen with 300 warm-up
# iterations on abt-buy (measured over 6 seeds, 1000 labels)
CALIBRATED_NUTS = {"dense_mass": True, "target_accept_prob": 0.9}


class ParameterDraws(NamedTuple):
    """A model's posterior draws for the report."""

    params: dict  # name -> (chain, draw, ...) numpy
    pi: Any  # (chain * draw, K, C) draws of π(y | stratum)
    mcmc: Any  # the NumPyro MCMC after its run (NUTS), else None
    prior: dict  # name -> array: ArviZ constant_data "prior_<name>"
    dims: dict  # variable (a parameter or "prior_<name>") -> its dims
    coords: dict  # the coordinates those dims need beyond stratum / class
    info: dict  # settings worth keeping in the InferenceData's attributes


class CalibratedSampler:
    """NUTS on the calibrated model's (a, b, log κ), keeping the per-draw sampler fields:
    the sampler of ``models.calibrated.run_nuts`` (same NumPyro model, default
    initialisation), run with ``jit_model_args``.  It owns its compiled samplers (as
    NumPyro's ``MCMC`` owns its compiled functions): pass one instance to several
    ``fit_finite_pool`` calls (``sampler=``) and calls with the same settings and
    number of strata do not compile again."""

    def __init__(self, keep: int = 4):
        self._mcmc = {}
        self._keep = int(keep)

    def run(self, key, lp, counts, num_warmup, num_samples, num_chains, chain_method, nuts_kwargs,
            extra_fields=("diverging", "num_steps"), groups=None, n_groups=None, band_scale=None, slope_sd=None):
        from functools import partial

        from numpyro.infer import MCMC, NUTS

        from . import calibrated as cal

        counts = jnp.asarray(counts, dtype=jnp.float64)
        z = cal.score_logit(lp)
        scales = cal.band_scale_grid(band_scale)
        ck = (int(num_warmup), int(num_samples), int(num_chains), chain_method, tuple(sorted(nuts_kwargs.items())),
              tuple(extra_fields), None if groups is None else int(n_groups), scales, slope_sd)
        mcmc = self._mcmc.pop(ck, None)
        if mcmc is None:
            model = partial(cal.numpyro_model, band_scales=scales, prior=cal.POSTERIOR_PRIOR, slope_sds=slope_sd)
            mcmc = MCMC(NUTS(model, **nuts_kwargs), num_warmup=num_warmup, num_samples=num_samples,
                        num_chains=num_chains, chain_method=chain_method, progress_bar=False, jit_model_args=True)
        curve = cal.make_curve(z, cal.BANDS, band_scale, groups=groups, n_groups=n_groups, prior=cal.POSTERIOR_PRIOR)
        m_b = cal.n_band_offsets(curve)
        mcmc.run(key, curve.z, counts, curve.band, curve.precision[:m_b, :m_b], curve.group,
                 extra_fields=tuple(extra_fields))
        self._mcmc[ck] = mcmc
        while len(self._mcmc) > self._keep:
            self._mcmc.pop(next(iter(self._mcmc)))
        return mcmc


def _calibrated_pi():
    from ..posterior import calibrated_pi

    return jax.jit(calibrated_pi)


@functools.partial(jax.jit, static_argnames=("n_proposals", "groups", "n_groups", "band_scale", "num_samples", "slope_sd"))
def _fast_draws(keys, lp, counts, unlabeled, *, n_proposals: int, groups, n_groups, band_scale, num_samples: int,
                slope_sd=None):
    """The fast route's draws, one chain per key: one jitted function, so JAX compiles it once per
    setting and shape (the leaf probabilities, counts and unlabeled items are arguments) and a
    report refitted on new labels does not compile again (a fresh closure was traced on every fit
    before stop 77: ~7 s of XLA per abt-buy fit).  The model's offset grid depends on the settings
    only, not on the scores; it is built at trace time (``ensure_compile_time_eval``) because its
    prior is computed in NumPy."""
    from . import calibrated as cal

    grp = None if groups is None else np.asarray(groups, dtype=np.int64)
    with jax.ensure_compile_time_eval():
        om = cal.calibrated_model(lp, n_proposals=n_proposals, bands=cal.BANDS, groups=grp, n_groups=n_groups,
                                  band_scale=band_scale, prior=cal.POSTERIOR_PRIOR, slope_sd=slope_sd)

    def one(k):
        d = om.sample(k, counts, unlabeled, num_samples)
        return (d["a"], d["b"], d["kappa"], d["band_offset"], d["group_offset"], d["pi"], d["importance_ess"],
                d.get("group_scale"), d.get("band_scale"), d.get("slope_sd"))

    return jax.vmap(one)(keys)


def calibrated_draws(key, pi_key, leaf_probs, counts, unlabeled, *, method: str, num_chains: int, num_warmup: int,
                     num_samples: int, thin: int, n_proposals: int, chain_method: str, nuts_kwargs: dict,
                     extra_fields: tuple, sampler=None, depth=8, branching=None, strength=1.0,
                     groups=None, n_groups=None, band_scale=None, slope_sd=None) -> ParameterDraws:
    """The calibrated model's (a, b, κ) and π (see the module docstring): ``key`` for the
    parameters, ``pi_key`` for π given them; ``depth``, ``branching``, ``strength`` are the
    tree's and ignored; ``band_scale`` the band walk's scale (default ``calibrated.BAND_SCALE``), ``slope_sd``
    the slope prior's sds (default ``calibrated.SLOPE_SD``; ``()``: the prior's own, fixed).  With C > 2 classes: the binary model's draws on the top split
    (``models/calibrated_classes.py``), then the other classes' split per top class from its
    exact Dirichlet conditional (``error_split`` [top_class, class]) after its spread η from its
    posterior on a grid (``error_spread``), its prior the classifier's shares mixed with the labels'
    reverse confusion (``calibrated_classes.error_base``) at the weight learned beside η
    (``error_share_weight``), its mass learned too (``error_mass``)."""
    from . import calibrated as cal

    if np.asarray(leaf_probs).shape[1] > 2:
        from . import calibrated_classes
        from .calibrated_classes import classes_pi, top_classes, top_split, unit_sizes

        lp2, counts2 = top_split(leaf_probs, counts)
        d = calibrated_draws(key, pi_key, lp2, counts2, unlabeled, method=method, num_chains=num_chains,
                             num_warmup=num_warmup, num_samples=num_samples, thin=thin, n_proposals=n_proposals,
                             chain_method=chain_method, nuts_kwargs=nuts_kwargs, extra_fields=extra_fields,
                             sampler=sampler, n_groups=np.asarray(leaf_probs).shape[1],
                             groups=top_classes(leaf_probs) if calibrated_classes.CLASS_OFFSETS else None,
                             band_scale=calibrated_classes.TOP_BAND_SCALE, slope_sd=())
        pi, phi, eta, w, mass = classes_pi(jax.random.fold_in(pi_key, 1), leaf_probs, counts, jnp.asarray(d.pi)[..., 1],
                                     unit_sizes(counts, unlabeled))
        c = phi.shape[-1]
        shape = np.asarray(d.params["a"]).shape
        params = dict(d.params, error_split=np.asarray(phi).reshape(shape + (c, c)),
                      error_spread=np.asarray(eta).reshape(shape), error_share_weight=np.asarray(w).reshape(shape),
                      error_mass=np.asarray(mass).reshape(shape))
        return d._replace(params=params, pi=pi, dims=dict(d.dims, error_split=["top_class", "class"]),
                          coords=dict(d.coords, top_class=np.arange(c)))

    lp = jnp.asarray(leaf_probs, dtype=jnp.float64)
    k_fit, k_pi = key, pi_key
    slope = cal.SLOPE_SD if slope_sd is None else slope_sd
    slope = () if slope is None else cal.group_scale_grid(slope)
    slope = slope or None       # none: the prior's own sd; one: that sd, fixed; several: learned
    prior = {name: np.asarray(v, dtype=np.float64) for name, v in cal.POSTERIOR_PRIOR.items()}
    info: dict = {}
    mcmc, scale_draws = None, None      # scale_draws: τ per draw, where it is learned over a grid (fast route)
    band_scale_draws = None             # likewise the band offsets' random-walk scale
    slope_draws = None                  # likewise the slope prior's sd
    if method == "nuts":
        mcmc = (sampler or CalibratedSampler()).run(k_fit, lp, counts, num_warmup, num_samples, num_chains,
                                                    chain_method, {**CALIBRATED_NUTS, **nuts_kwargs}, extra_fields,
                                                    groups=groups, n_groups=n_groups, band_scale=band_scale, slope_sd=slope)
        s = mcmc.get_samples(group_by_chain=True)
        a, b, lk = (np.asarray(s[n]) for n in ("a", "b", "log_kappa"))
        d = np.asarray(s["band_offset"]) if "band_offset" in s else np.zeros(a.shape + (0,))
        e = np.asarray(s["group_offset"]) if "group_offset" in s else np.zeros(a.shape + (0,))
        kappa = np.exp(lk)
        flat = lambda x: jnp.asarray(x.reshape((-1,) + x.shape[2:]))  # noqa: E731
        pi = _calibrated_pi()(k_pi, lp, counts, flat(a), flat(b), flat(kappa), flat(d) if d.shape[-1] else None,
                              flat(e) if e.shape[-1] else None, None if groups is None else jnp.asarray(groups))
    else:
        a, b, kappa, d, e, pi, iess, tau, s_band, s_slope = _fast_draws(
            jax.random.split(k_fit, num_chains), lp, jnp.asarray(counts, dtype=jnp.float64),
            jnp.asarray(unlabeled, dtype=jnp.float64), n_proposals=int(n_proposals),
            groups=None if groups is None else tuple(np.asarray(groups).tolist()),
            n_groups=None if n_groups is None else int(n_groups), band_scale=cal.band_scale_grid(band_scale),
            num_samples=int(num_samples), slope_sd=slope)
        slope_draws = None if s_slope is None else np.asarray(s_slope)   # the slope prior's sd, where learned
        band_scale_draws = None if s_band is None else np.asarray(s_band)   # the walk's scale, where learned
        a, b, kappa, d, e = np.asarray(a), np.asarray(b), np.asarray(kappa), np.asarray(d), np.asarray(e)
        scale_draws = None if tau is None else np.asarray(tau)   # τ learned over a grid: each draw's
        lk = np.log(kappa)
        pi = jnp.asarray(pi).reshape((-1,) + pi.shape[2:])
        info["importance_ess"] = np.asarray(iess).tolist()
        info["n_proposals"] = int(n_proposals)
    params = {"a": a, "b": b, "kappa": kappa, "log_kappa": lk}
    if scale_draws is not None:
        params["class_offset_scale"] = scale_draws
    if band_scale_draws is not None:
        params["band_offset_scale"] = band_scale_draws
    if slope_draws is not None:
        params["slope_prior_sd"] = slope_draws
    if slope is not None:
        info["slope_sd"] = slope[0] if len(slope) == 1 else list(slope)
    dims = {f"prior_{name}": ["moment"] for name in prior}
    coords = {"moment": ["mean", "sd"]}
    if d.shape[-1]:
        params["band_offset"] = d
        dims["band_offset"] = ["band"]
        coords["band"] = np.arange(d.shape[-1])
        info["bands"] = int(d.shape[-1])
        bs = cal.band_scale_grid(band_scale)
        info["band_scale"] = bs[0] if len(bs) == 1 else list(bs)
    if e.shape[-1]:
        params["class_offset"] = e
        dims["class_offset"] = ["top_class"]
        coords["top_class"] = np.arange(e.shape[-1])
        scales = cal.group_scale_grid()
        info["class_offset_scale"] = scales[0] if len(scales) == 1 else list(scales)
    return ParameterDraws(params, pi, mcmc, prior, dims, coords, info)


def tree_draws(key, pi_key, leaf_probs, counts, unlabeled, *, method: str, num_chains: int, num_warmup: int,
               num_samples: int, thin: int, n_proposals: int, chain_method: str, nuts_kwargs: dict,
               extra_fields: tuple, sampler=None, depth=8, branching=None, strength=1.0) -> ParameterDraws:
    """The Dirichlet tree's θ, branch probabilities φ and π (see the module docstring);
    ``pi_key`` (π is a function of the draws), ``sampler`` and ``n_proposals`` are the
    calibrated model's and ignored."""
    from ..strata import tree_shape
    from . import tree as dt
    from . import tree_nuts

    lp = jnp.asarray(leaf_probs, dtype=jnp.float64)
    n_strata, c = lp.shape
    shape = tree_shape(n_strata, depth, branching)
    spec = dt.TreeSpec(shape.depth, shape.branching)
    pr = dt.prior_from_scores(lp, spec, strength)
    prior = {"alpha": np.asarray(pr.alpha), "beta": np.asarray(jnp.concatenate(
        [bb.reshape(c, -1, spec.branching) for bb in pr.betas], axis=1))}
    info = {"depth": int(spec.depth), "branching": int(spec.branching), "strength": float(strength)}
    mcmc = None
    if method == "nuts":
        mcmc = tree_nuts.run_nuts(key, pr, spec, counts, unlabeled, num_warmup=num_warmup, num_samples=num_samples,
                                  num_chains=num_chains, chain_method=chain_method, extra_fields=extra_fields,
                                  **nuts_kwargs)
        s = mcmc.get_samples(group_by_chain=True)
        theta, phi = np.asarray(s["theta"]), np.asarray(s["phi"])
    else:
        mode = dt.em(pr, counts, unlabeled)
        thetas, phis = [], []
        for kc in jax.random.split(key, num_chains):
            d = dt.gibbs(kc, pr, counts, unlabeled, int(num_samples), n_warmup=int(num_warmup), init=mode,
                         thin=int(thin))
            thetas.append(np.asarray(d["theta"]))
            phis.append(np.asarray(jnp.concatenate(d["phis"], axis=2)))
        theta, phi = np.stack(thetas), np.stack(phis)
        info["thin"] = int(thin)
    p_flat = tree_nuts.params_from_samples({"theta": jnp.asarray(theta.reshape((-1,) + theta.shape[2:])),
                                            "phi": jnp.asarray(phi.reshape((-1,) + phi.shape[2:]))}, spec)
    pi = jax.jit(jax.vmap(lambda p: dt.predictive(p, n_leaves=n_strata)))(p_flat)
    n_int, br = phi.shape[-2:]
    dims = {"theta": ["class"], "phi": ["class", "node", "branch"], "prior_alpha": ["class"],
            "prior_beta": ["class", "node", "branch"]}
    return ParameterDraws({"theta": theta, "phi": phi}, pi, mcmc, prior, dims,
                          {"node": np.arange(n_int), "branch": np.arange(br)}, info)
