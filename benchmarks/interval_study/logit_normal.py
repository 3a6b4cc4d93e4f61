"""Study code (issue 15, item 1): the calibrated model with a **logit-normal** departure of
each stratum from the calibration curve instead of the Beta's,

    logit π_k = a + b z_k + σ ε_k,   ε_k ~ N(0, 1),

the usual random effect of a logistic GLMM.  Why: ``variance_by_stratum.py`` shows that on
abt-buy ~80% of the posterior variance of the hidden positives comes from the strata's
departures (not the curve's level), in strata of ~1,200 items with a dozen labels.  The
library's Beta(κμ_k, κ(1−μ_k)) has sd(π_k)/μ_k ≈ 1/sqrt(κ μ_k), which explodes as μ_k → 0:
one κ, learned where the strata are dense, lets a tail stratum whose curve says 2·10⁻⁴ sit
at ten times that.  A logit-normal departure keeps the *relative* spread (on the odds
scale) the same at every level.

Inference is the library's (``calibrated.fit_mode`` and ``sample_params`` with this model's
``log_posterior``): (a, b, log σ) by Laplace-t importance resampling on their marginal posterior, each stratum's likelihood integrated over ε_k by Gauss–Hermite
quadrature (``NODES`` nodes); given θ, ε_k is drawn from its posterior on the quadrature
grid (a discrete approximation, jittered within the node's cell).
Priors: a ~ N(0, 3²), b ~ N(1, 1.5²), log σ ~ N(0, 1).
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bayes_eval.models.calibrated import CalibratedState, score_logit, calibrated_model, fit_mode, sample_params  # noqa: E402

PRIOR = {"a": (0.0, 3.0), "b": (1.0, 1.5), "log_sigma": (0.0, 1.0)}
NODES = 48
_X, _W = np.polynomial.hermite_e.hermegauss(NODES)  # ∫ f(x) e^{-x²/2} dx
GH_X = jnp.asarray(_X)
GH_LOGW = jnp.asarray(np.log(_W / np.sqrt(2 * np.pi)))


def _node_loglik(theta, z, counts):
    """(K, NODES): log p(counts_k | ε_k = node) + log weight."""
    eta = theta[0] + theta[1] * z
    lo = eta[:, None] + jnp.exp(theta[2]) * GH_X[None, :]
    n1, n0 = counts[:, 1:2], counts[:, 0:1]
    return n1 * jax.nn.log_sigmoid(lo) + n0 * jax.nn.log_sigmoid(-lo) + GH_LOGW[None, :]


def log_posterior(theta, z, counts):
    ll = jnp.sum(jax.scipy.special.logsumexp(_node_loglik(theta, z, counts), axis=1))
    lp = 0.0
    for v, (m, s) in zip(theta, PRIOR.values()):
        lp = lp - 0.5 * ((v - m) / s) ** 2
    return ll + lp


def logit_normal_model(leaf_probs, n_proposals=1024):
    z = score_logit(leaf_probs)
    base = calibrated_model(leaf_probs)

    def sample(key, counts, unlabeled, n_draws, state=None):
        init = CalibratedState(jnp.array([m for m, _ in PRIOR.values()]), jnp.diag(jnp.array([s**2 for _, s in PRIOR.values()])))
        st = fit_mode(z, counts, init=init, log_post=log_posterior)
        k1, k3, k4, k5 = jax.random.split(key, 4)
        th, _ = sample_params(k1, z, counts, st, n_draws, n_proposals, log_post=log_posterior)
        nl = jax.vmap(lambda t: _node_loglik(t, z, counts))(th)           # (n, K, NODES)
        j = jax.random.categorical(k3, nl, axis=-1)                        # (n, K)
        gap = jnp.diff(GH_X)
        half = jnp.concatenate([gap[:1], gap]) / 2.0
        eps = GH_X[j] + half[j] * jax.random.uniform(k4, j.shape, minval=-1.0, maxval=1.0)
        pi1 = jax.nn.sigmoid(th[:, :1] + th[:, 1:2] * z[None, :] + jnp.exp(th[:, 2:3]) * eps)
        m1 = jax.random.binomial(k5, unlabeled[None, :], pi1)
        return {"pi": jnp.stack([1 - pi1, pi1], axis=-1),
                "unlabeled_counts": jnp.stack([unlabeled[None, :] - m1, m1], axis=-1),
                "a": th[:, 0], "b": th[:, 1], "sigma": jnp.exp(th[:, 2])}

    return base._replace(sample=sample)
