"""Study code (issue 15, rejected -- ``benchmarks/results/interval_monotone.md``): a
monotone Markov-chain prior down the strata in logit π, a Gamma-process-like curve (no drop
over a z gap Δz with probability e^{−ν Δz}, else a geometric drop on the grid of mean s/ν,
s = softplus(b) the mean slope), the top stratum at the calibration curve a + b z_top.
Exact on the grid by forward filtering (the drop kernel is a linear recurrence: an
associative scan) and backward sampling; (a, b, log ν) by importance resampling around the
calibrated model's (a, b) mode.  A monotone prior that is not tied to independent strata
does not tighten the abt-buy interval: after its last drop a flat tail is as plausible as an
empty one.
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from bayes_eval.models.calibrated import PRIOR as CAL_PRIOR  # noqa: E402
from bayes_eval.models.calibrated import score_logit  # noqa: E402
from bayes_eval.models.calibrated import calibrated_model, fit_mode  # noqa: E402
from monotone_restricted import GRID, _student_t, chain_order  # noqa: E402  (same grid and order)

#: (a, b) as in the calibrated model; ν the rate of drops per unit of z
PRIOR = {"a": CAL_PRIOR["a"], "b": CAL_PRIOR["b"], "log_nu": (float(np.log(4.0)), 1.5)}
TOP_SD = 1.0
#: z gap given to strata of equal z (a tied bin split by predicted class)
TIE_GAP = 0.5


def _gaps(zc):
    g = jnp.maximum(zc[:-1] - zc[1:], 0.0)
    return jnp.where(g > 0, g, TIE_GAP)


def _links(theta, zc):
    """Per link (upper → lower): log P(no drop), log P(drop)·(1 − q), and log q of the
    geometric drop on the grid (mean drop s/ν in logit)."""
    s, nu = jax.nn.softplus(theta[1]), jnp.exp(theta[2])
    log_stay = -nu * _gaps(zc)
    log_q = jnp.log(jnp.clip(1.0 - (GRID[1] - GRID[0]) * nu / s, 0.0, 1.0 - 1e-9))
    return log_stay, jnp.log(-jnp.expm1(log_stay)) + jnp.log1p(-jnp.exp(log_q)), log_q


def _drops(f, log_q):
    """log Σ_{i' > i} exp(f(i')) q^(i' − i − 1): y(i) = e^{f(i+1)} + q y(i+1), an associative scan."""
    b = jnp.concatenate([f[1:], jnp.array([-jnp.inf])])[::-1]
    a = jnp.full_like(b, log_q)
    _, out = jax.lax.associative_scan(lambda x, y: (x[0] + y[0], jnp.logaddexp(x[1] + y[0], y[1])), (a, b))
    return out[::-1]


def forward_log(theta, zc, n1, n0):
    """Forward messages down the chain (top first); returns (messages (J, G), log Z)."""
    ll = n1[:, None] * jax.nn.log_sigmoid(GRID)[None, :] + n0[:, None] * jax.nn.log_sigmoid(-GRID)[None, :]
    log_stay, log_jump, log_q = _links(theta, zc)
    top = -0.5 * ((GRID - (theta[0] + theta[1] * zc[0])) / TOP_SD) ** 2
    first = top - jax.scipy.special.logsumexp(top) + ll[0]

    def step(f, inp):
        lj, ls, l_ll = inp
        m = jnp.logaddexp(ls + f, lj + _drops(f, log_q)) + l_ll
        return m, m

    last, rest = jax.lax.scan(step, first, (log_jump, log_stay, ll[1:]))
    return jnp.concatenate([first[None], rest], axis=0), jax.scipy.special.logsumexp(last)


def backward_sample(key, theta, zc, msgs):
    """Grid indices (J,): the bottom from its message, then each one above given the one below."""
    log_stay, log_jump, log_q = _links(theta, zc)
    u = jax.random.uniform(key, (msgs.shape[0],))
    idx = jnp.arange(msgs.shape[1])

    def pick(lw, uj):
        c = jnp.cumsum(jnp.exp(lw - jnp.max(lw)))
        return jnp.minimum(jnp.searchsorted(c, uj * c[-1], side="right"), msgs.shape[1] - 1)

    bottom = pick(msgs[-1], u[-1])

    def step(below, inp):
        m, ls, lj, uj = inp
        k = idx - below - 1
        link = jnp.where(idx == below, ls, jnp.where(idx > below, lj + jnp.where(k > 0, k * log_q, 0.0), -jnp.inf))
        v = pick(m + link, uj)
        return v, v

    _, upper = jax.lax.scan(step, bottom, (msgs[:-1], log_stay, log_jump, u[:-1]), reverse=True)
    return jnp.concatenate([upper, bottom[None]])


def log_marginal(theta, zc, n1, n0):
    lp = sum(-0.5 * ((v - m) / s) ** 2 for v, (m, s) in zip(theta, PRIOR.values()))
    return lp + forward_log(theta, zc, n1, n0)[1]


def monotone_model(leaf_probs, n_proposals: int = 128, n_theta: int = 16, fit_iters: int = 25):
    """The chain model behind the ``OracleModel`` interface (binary); proposals for
    (a, b, log ν) around the calibrated model's (a, b) mode and ν's prior."""
    lp = np.asarray(leaf_probs, dtype=np.float64)
    order = chain_order(lp)[::-1].copy()
    z = score_logit(lp)
    zc, oj = z[order], jnp.asarray(order)
    step = GRID[1] - GRID[0]
    base = calibrated_model(lp, fit_iters=fit_iters)  # init_state, fit, predictive, posterior_predictive

    def chain_draws(key, t, n1, n0, n):
        msgs, _ = forward_log(t, zc, n1, n0)

        def one(k):
            ka, kb = jax.random.split(k)
            lg = GRID[backward_sample(ka, t, zc, msgs)]
            return jax.nn.sigmoid(-jnp.sort(-(lg + step * (jax.random.uniform(kb, lg.shape) - 0.5))))

        return jax.vmap(one)(jax.random.split(key, n))

    def sample(key, counts, unlabeled, n_draws, state=None):
        st = fit_mode(z, counts, init=state, n_iter=25 if state is None else 4)
        n1, n0 = counts[oj, 1], counts[oj, 0]
        k1, k2, k3, k4 = jax.random.split(key, 4)
        mean = jnp.concatenate([st.mode[:2], jnp.array([PRIOR["log_nu"][0]])])
        cov = jnp.zeros((3, 3)).at[:2, :2].set(2.0 * st.cov[:2, :2]).at[2, 2].set(PRIOR["log_nu"][1] ** 2)
        x, logq = _student_t(k1, mean, cov, n_proposals)
        logp = jax.vmap(lambda t: log_marginal(t, zc, n1, n0))(x)
        logw = jnp.where(jnp.isfinite(logp), logp - logq, -jnp.inf)
        w = jnp.exp(logw - jnp.max(logw))
        w = w / jnp.sum(w)
        n_t = min(n_theta, n_draws)
        per = -(-n_draws // n_t)
        u = (jax.random.uniform(k2) + jnp.arange(n_t)) / n_t
        pick = jnp.clip(jnp.searchsorted(jnp.cumsum(w), u), 0, n_proposals - 1)
        pic = jax.vmap(lambda k, t: chain_draws(k, t, n1, n0, per))(jax.random.split(k3, n_t), x[pick])
        pic = pic.reshape((n_t * per, -1))[:n_draws]
        th = jnp.repeat(x[pick], per, axis=0)[:n_draws]
        pi1 = jax.nn.sigmoid(th[:, :1] + th[:, 1:2] * z[None, :]).at[:, oj].set(pic)
        m1 = jax.random.binomial(k4, unlabeled[None, :], pi1)
        return {"pi": jnp.stack([1 - pi1, pi1], -1), "unlabeled_counts": jnp.stack([unlabeled[None, :] - m1, m1], -1),
                "a": th[:, 0], "b": th[:, 1], "nu": jnp.exp(th[:, 2]), "importance_ess": 1.0 / jnp.sum(w**2)}

    return base._replace(name="monotone-chain", sample=sample)
