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

Inference as the library's: (a, b, log σ) by Laplace-t importance resampling on their
marginal posterior, each stratum's likelihood integrated over ε_k by Gauss–Hermite
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

from bayes_eval.models.calibrated import _student_t, _z_of, calibrated_model  # noqa: E402

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


def fit_mode(z, counts, n_iter=40):
    theta = jnp.array([m for m, _ in PRIOR.values()])
    f = lambda t: log_posterior(t, z, counts)  # noqa: E731
    grad, hess = jax.grad(f), jax.hessian(f)

    def step(t, _):
        g, h = grad(t), hess(t)
        lam = jnp.maximum(0.0, jnp.max(jnp.linalg.eigvalsh(h))) + 1e-3
        d = jnp.linalg.solve(-(h - lam * jnp.eye(3)), g)
        d = d * jnp.minimum(1.0, 2.0 / jnp.maximum(jnp.linalg.norm(d), 1e-12))
        return jnp.where(f(t + d) >= f(t), t + d, t + 0.25 * d), None

    theta, _ = jax.lax.scan(step, theta, None, length=n_iter)
    h = hess(theta)
    cov = jnp.linalg.inv(-h)
    ok = jnp.all(jnp.isfinite(cov)) & jnp.all(jnp.linalg.eigvalsh(-h) > 0)
    return theta, jnp.where(ok, 0.5 * (cov + cov.T), jnp.diag(jnp.array([s**2 for _, s in PRIOR.values()])))


def logit_normal_model(leaf_probs, n_proposals=1024):
    z = _z_of(leaf_probs)
    base = calibrated_model(leaf_probs)

    def sample(key, counts, unlabeled, n_draws, state=None):
        mode, cov = fit_mode(z, counts)
        k1, k2, k3, k4, k5 = jax.random.split(key, 5)
        x, logq = _student_t(k1, mode, 1.5 * cov, n_proposals)
        logp = jax.vmap(lambda t: log_posterior(t, z, counts))(x)
        logw = jnp.where(jnp.isfinite(logp), logp - logq, -jnp.inf)
        w = jnp.exp(logw - jnp.max(logw))
        w = w / jnp.sum(w)
        u = (jax.random.uniform(k2) + jnp.arange(n_draws)) / n_draws
        th = x[jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n_proposals - 1)]
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
