"""Study code (issue 15, rejected -- ``benchmarks/results/interval_monotone.md``): the
calibrated model's independent Beta priors restricted to the monotone cone (Gelfand, Smith &
Lee 1992, "Bayesian analysis of constrained parameter and truncated data problems using
Gibbs sampling", JASA 87), exact on a logit grid: the order makes the strata a chain with
transition 1[u ≤ v], so a forward pass of cumulative sums gives the constrained marginal
likelihood of (a, b, log κ), log Z(data) − log Z(no data), and a backward pass draws π
exactly; (a, b, log κ) by importance resampling from the calibrated model's Laplace-t
proposal.  Tight on abt-buy, wrong on dblp-acm: conditioning many independent heavy-tailed
priors on their order pushes the upper strata up (their rates must exceed the maximum of
everything below them).
"""
from __future__ import annotations

import os
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bayes_eval.models.calibrated import PRIOR as CAL_PRIOR  # noqa: E402
from bayes_eval.models.calibrated import _student_t  # noqa: E402,F401  (study code: the calibrated proposal)
from bayes_eval.models.calibrated import calibrated_model, fit_mode, score_logit  # noqa: E402

#: logit π grid: rates from 2e-9 to 1 − 6e-6 in steps of 0.1 in logit (±5 % in π at low rates)
GRID = jnp.arange(-20.0, 12.0 + 1e-9, 0.1)


class MonotoneSample(NamedTuple):
    pi1: jnp.ndarray  # (n, K)
    theta: jnp.ndarray  # (n, 3)
    ess: jnp.ndarray  # ()


def chain_order(leaf_probs) -> np.ndarray:
    """The non-empty strata by the logit of their mean classifier probability, ascending
    (an empty stratum has all-zero ``leaf_probs``); ties keep the strata's index order."""
    lp = np.asarray(leaf_probs, dtype=np.float64)
    active = np.flatnonzero(lp.sum(1) > 0.5)
    z = np.asarray(score_logit(lp))[active]
    return active[np.argsort(z, kind="stable")]


def _log_phi(theta, zc, n1, n0, with_data: bool):
    """(J, G): log prior density of each chain stratum on the logit grid (Jacobian
    π(1 − π) included), plus the binomial log-likelihood of its labels."""
    a, b, kappa = theta[0], theta[1], jnp.exp(theta[2])
    mu = jnp.clip(jax.nn.sigmoid(a + b * zc), 1e-12, 1 - 1e-12)
    al, be = kappa * mu, kappa * (1 - mu)
    lv, l1v = jax.nn.log_sigmoid(GRID), jax.nn.log_sigmoid(-GRID)
    out = al[:, None] * lv[None, :] + be[:, None] * l1v[None, :] - betaln(al, be)[:, None]
    if with_data:
        out = out + n1[:, None] * lv[None, :] + n0[:, None] * l1v[None, :]
    return out


def forward_log(log_phi):
    """Forward messages of the ordered chain: m_0 = φ_0, m_j(v) = φ_j(v) Σ_{u ≤ v} m_{j−1}(u);
    returns (messages (J, G), log Z)."""
    def step(prev, phi):
        # Σ_{u ≤ v} exp(prev(u)) by a cumulative sum scaled by the maximum (lax.cumlogsumexp
        # is ~25× slower on the CPU); a prefix more than ~700 nats below the maximum
        # underflows to −inf, a mass below 1e-300 of the message's
        top = jnp.max(prev)
        m = phi + jnp.log(jnp.cumsum(jnp.exp(prev - top))) + top
        return m, m

    first = log_phi[0]
    last, rest = jax.lax.scan(step, first, log_phi[1:])
    msgs = jnp.concatenate([first[None], rest], axis=0)
    return msgs, jax.scipy.special.logsumexp(last)


def backward_sample(key, msgs):
    """One exact draw of grid indices (J,) from the chain: the top stratum from m_{J−1},
    then each lower one from m_j restricted to values ≤ the one above (inverse CDF, one
    uniform per stratum)."""
    u = jax.random.uniform(key, (msgs.shape[0],))
    idx = jnp.arange(msgs.shape[1])

    def pick(m, above, uj):
        w = jnp.where(idx <= above, jnp.exp(m - jnp.max(jnp.where(idx <= above, m, -jnp.inf))), 0.0)
        c = jnp.cumsum(w)
        return jnp.minimum(jnp.searchsorted(c, uj * c[-1], side="right"), above)

    top = pick(msgs[-1], msgs.shape[1] - 1, u[-1])

    def step(above, inp):
        m, uj = inp
        v = pick(m, above, uj)
        return v, v

    _, lower = jax.lax.scan(step, top, (msgs[:-1], u[:-1]), reverse=True)
    return jnp.concatenate([lower, top[None]])


def chain_draws(key, theta, zc, n1, n0, n: int, jitter: bool = True):
    """``n`` draws (n, J) of the chain strata's π_1 given one (a, b, log κ): one forward
    pass, ``n`` backward draws; ``jitter`` spreads each drawn rate uniformly within its grid
    step in logit, re-sorted along the chain so the order holds."""
    msgs, _ = forward_log(_log_phi(theta, zc, n1, n0, True))
    step = GRID[1] - GRID[0]

    def one(k):
        ka, kb = jax.random.split(k)
        lg = GRID[backward_sample(ka, msgs)]
        if jitter:
            lg = jnp.sort(lg + step * (jax.random.uniform(kb, lg.shape) - 0.5))
        return jax.nn.sigmoid(lg)

    return jax.vmap(one)(jax.random.split(key, n))


def _log_prior_theta(theta):
    lp = 0.0
    for v, (m, s) in zip(theta, CAL_PRIOR.values()):
        lp = lp - 0.5 * ((v - m) / s) ** 2
    return lp


def log_marginal(theta, zc, n1, n0):
    """log p(a, b, log κ | labels) up to a constant under the order constraint:
    prior + log Z(data) − log Z(no data)."""
    _, lz1 = forward_log(_log_phi(theta, zc, n1, n0, True))
    _, lz0 = forward_log(_log_phi(theta, zc, n1, n0, False))
    return _log_prior_theta(theta) + lz1 - lz0


def monotone_model(leaf_probs, n_proposals: int = 64, n_theta: int = 16, fit_iters: int = 25,
                   jitter: bool = True):
    """The monotone calibrated model behind the ``OracleModel`` interface (binary pools).

    ``leaf_probs`` (K, 2): the classifier's mean class probabilities per stratum (all-zero
    rows: empty strata, left out of the chain); ``n_proposals``: importance proposals of
    (a, b, log κ) per posterior; ``n_theta``: the distinct resampled draws of (a, b, log κ), each
    with an equal share of the draws of π (one forward pass each); ``jitter``: spread each drawn rate uniformly within its
    grid step (then re-sorted along the chain, so the order holds).
    """

    lp = np.asarray(leaf_probs, dtype=np.float64)
    if lp.shape[1] != 2:
        raise ValueError("the monotone model is binary (C = 2)")
    order = chain_order(lp)
    if order.size == 0:
        raise ValueError("the monotone model needs at least one non-empty stratum")
    z = score_logit(lp)
    zc = z[order]
    order_j = jnp.asarray(order)
    base = calibrated_model(lp, fit_iters=fit_iters)  # init_state, fit, predictive, posterior_predictive

    def draw_pi(key, counts, n_draws, state):
        """Draws of π_1 (n, K) and of (a, b, log κ) from the constrained posterior."""
        n1, n0 = counts[order_j, 1], counts[order_j, 0]
        k1, k2, k3 = jax.random.split(key, 3)
        x, logq = _student_t(k1, state.mode, 2.0 * state.cov, n_proposals)
        logp = jax.vmap(lambda t: log_marginal(t, zc, n1, n0))(x)
        logw = jnp.where(jnp.isfinite(logp), logp - logq, -jnp.inf)
        w = jnp.exp(logw - jnp.max(logw))
        w = w / jnp.sum(w)
        n_t = min(n_theta, n_draws)
        per = -(-n_draws // n_t)
        u = (jax.random.uniform(k2) + jnp.arange(n_t)) / n_t
        pick = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n_proposals - 1)

        pic = jax.vmap(lambda k, t: chain_draws(k, t, zc, n1, n0, per, jitter))(jax.random.split(k3, n_t), x[pick])
        pic = pic.reshape((n_t * per, -1))[:n_draws]
        th = jnp.repeat(x[pick], per, axis=0)[:n_draws]
        mu = jax.nn.sigmoid(th[:, :1] + th[:, 1:2] * z[None, :])
        pi1 = mu.at[:, order_j].set(pic)  # empty strata: their curve value (no items to draw)
        return MonotoneSample(pi1=pi1, theta=th, ess=1.0 / jnp.sum(w**2))

    def sample(key, counts, unlabeled, n_draws, state=None):
        st = fit_mode(z, counts, init=state, n_iter=25 if state is None else 4)
        k1, k2 = jax.random.split(key)
        s = draw_pi(k1, counts, n_draws, st)
        pi = jnp.stack([1 - s.pi1, s.pi1], axis=-1)
        m1 = jax.random.binomial(k2, unlabeled[None, :], s.pi1)
        m = jnp.stack([unlabeled[None, :] - m1, m1], axis=-1)
        return {"pi": pi, "unlabeled_counts": m, "a": s.theta[:, 0], "b": s.theta[:, 1],
                "kappa": jnp.exp(s.theta[:, 2]), "importance_ess": s.ess}

    return base._replace(name="monotone-calibrated", sample=sample)

