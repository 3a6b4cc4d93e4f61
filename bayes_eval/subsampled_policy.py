"""Policy value from a log whose zero-reward rows were subsampled (004 §"Policy Value
Estimation").

A log row is ``(x, a, r(a), p(a|x), l)``: context, logged action, its reward, the logging
propensity and the keep probability of the row (zero-reward rows kept with probability
``l``, the others always; or a per-row inclusion probability ``b``).  With ``π(x)`` the
target policy's action, ``f = r 1{π(x) = a} / p(a|x)`` is the seed's per-row term, and
``w = l⁻¹ 1[r = 0] + 1[r ≠ 0]`` (``1/b`` in general).

* **η form** (the seed's "modified empirical policy estimator"):
  ``V̂_η = Σ f / η(H̃)`` with the effective size ``η(H̃) = Σ (l⁻¹ 1[r = 0] + 1[r ≠ 0])``
  (zero-reward rows have ``f = 0`` and ``w f = f``).  A ratio of two means under the
  subsampled distribution; its variance by the delta method over the i.i.d. log rows,
  :func:`bayes_eval.estimators.is_estimate_draws` of the loss ``[f, 1]`` with weights ``w``
  and ``g(R) = R₀/R₁``.  The seed: "presumably biased, hopefully not horribly so";
  :func:`bias_study` measures it.  A second-order expansion gives the relative bias
  ``E[V̂_η]/V − 1 ≈ Var(η)/E[η]² − Cov(Σf, η)/(E[η] E[Σf])``.  Here ``η = N + (K/l − Z)``
  with ``Z`` the zero-reward rows of the full log of ``N`` and ``K ~ Bin(Z, l)`` those kept,
  so ``E[η] = N``, ``Var(η) = E[Z] (1 − l)/l`` and ``Cov(Σf, η) = 0`` (``Σ f`` is fixed by the
  full log and ``E[K/l − Z | log] = 0``): the relative bias is ``≈ q₀ (1 − l) / (l N)``
  (``q₀`` the zero-reward share), positive, about one over the number of kept zero rows
  ``l Z`` times ``q₀²`` — small while many zero rows are kept, of order 1 when ``l N`` is
  of order 1.  :func:`eta_relative_bias` is that formula; :func:`bias_study` checks it.
* **HT form** (the original row count ``N`` known, as the seed notes it must be for the
  unsubsampled estimator): ``V̂_HT = (1/N) Σ w f`` — unbiased; variance
  ``(1/N)[(1/N) Σ w² f² − V̂²]`` (:func:`bayes_eval.estimators.is_estimate` with every row's
  own squared weight and n = N).

The truth is the policy's value under the distribution D (``target = "population"``): the
log itself is a sample.  Which reward decides the thinning: the *logged* one, ``r(a)``
(the seed's generative description "If r(a) = 0, reject"; its display writes
``r(π(x))``, but only ``r(a)`` is observed).
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401
from . import estimators as E
from .errors import PoolError
from .subsampled import SubsampledEstimate, check_finite, check_n_total, inclusion_probabilities, kish_n, padded

__all__ = ["policy_terms", "policy_value", "eta_relative_bias", "simulate_log", "bias_study"]


def policy_terms(action, propensity, reward, target_action) -> np.ndarray:
    """``f = r 1{π(x) = a} / p(a|x)`` per row, after checking the columns (PoolError naming
    the column and row)."""
    r = check_finite(reward, "reward")
    p = check_finite(propensity, "propensity")
    bad = (p <= 0) | (p > 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise PoolError(f"column 'propensity', row {i}: {float(p[i])!r} is not a probability in (0, 1]")
    a = np.asarray(action)
    t = np.asarray(target_action)
    if not (len(a) == len(t) == len(r) == len(p)):
        raise PoolError(f"columns have different lengths: action {len(a)}, propensity {len(p)}, reward {len(r)}, "
                        f"target_action {len(t)}")
    if len(r) == 0:
        raise PoolError("the log has no rows")
    return np.where(a == t, r / p, 0.0)


def _identity(R):
    return R


def _ratio(R):
    return jnp.atleast_1d(R[0] / R[1])


def policy_value(action, propensity, reward, target_action, *, keep_rate=None, keep_prob=None, n_total=None,
                 level: float = 0.95) -> SubsampledEstimate:
    """The value of the target policy from a thinned log (module docstring): the η form,
    or — with ``n_total``, the row count before thinning — the unbiased HT form (the η form
    is then in ``extra``).  ``keep_rate`` thins the zero-reward rows (a positive reward row
    must carry ``l = 1``), ``keep_prob`` gives every row's inclusion probability."""
    from scipy.stats import norm

    f = policy_terms(action, propensity, reward, target_action)
    check_n_total(n_total, len(f), "log rows")
    r = np.asarray(reward, float)
    b = inclusion_probabilities(r != 0, keep_rate, keep_prob)
    w = 1.0 / b
    # padded to a power of two with zero-weight rows (one compilation per size class): the
    # ratio and its variance do not depend on the row count n of is_estimate_draws
    rows, _, kept = padded(np.stack([f, np.ones_like(f)], axis=1), b)
    wp = np.where(kept, np.concatenate([w, np.zeros(len(kept) - len(w))]), 0.0)
    eta_est = E.is_estimate_draws(_ratio, rows, wp)
    v_eta, var_eta = float(eta_est.value[0]), float(eta_est.var[0])
    eta = float(w.sum())
    z = float(norm.ppf(0.5 + level / 2.0))
    extra = {"eta": eta, "estimate_eta": v_eta, "var_eta": var_eta, "kish_n": kish_n(w), "level": level,
             "target": "population", "n_nonzero": int(np.sum(r != 0))}
    if n_total is None:
        val, var, kind = v_eta, var_eta, "clt-eta-delta"
    else:
        ht = E.is_estimate(_identity, jnp.asarray(rows[:, :1]), jnp.asarray(wp), None,
                           jnp.asarray(float(n_total)), w2sum=jnp.asarray(wp * wp))
        val, var, kind = float(ht.value[0]), float(ht.var[0]), "clt-ht"
        extra.update({"estimate_ht": val, "var_ht": var, "n_total": float(n_total)})
    half = z * np.sqrt(max(var, 0.0))
    return SubsampledEstimate("policy-value", np.array([val]), (np.array([val - half]), np.array([val + half])),
                              kind, len(f), eta, ("policy-value",), np.array([var]), extra)


def eta_relative_bias(n_rows, zero_share, keep_rate):
    """Second-order relative bias of the η form, ``q₀ (1 − l) / (l N)`` (module docstring)."""
    l = np.asarray(keep_rate, float)
    return zero_share * (1.0 - l) / (l * np.asarray(n_rows, float))


def simulate_log(rng, n_rows: int, n_actions: int = 4, n_contexts: int = 20, base_rate: float = 0.05):
    """A synthetic contextual-bandit log with a known target-policy value.

    Contexts uniform on ``n_contexts``; reward of action a in context x Bernoulli with mean
    ``μ(x, a)`` around ``base_rate``; logging policy a softmax over actions (propensities
    0.1–0.6); the target policy the action with the largest μ after a fixed perturbation.
    Returns ``(log dict, true value)``; the log has ``context, action, propensity, reward,
    target_action``."""
    g = np.random.default_rng(12345)  # the environment is fixed; ``rng`` draws the log
    mu = np.clip(base_rate * g.gamma(2.0, 0.5, size=(n_contexts, n_actions)), 0.0, 1.0)
    logits = g.normal(0, 0.6, size=(n_contexts, n_actions))
    plog = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    pi = np.argmax(mu + g.normal(0, base_rate * 0.3, size=mu.shape), axis=1)
    value = float(np.mean(mu[np.arange(n_contexts), pi]))
    x = rng.integers(0, n_contexts, n_rows)
    u = rng.random(n_rows)
    a = (u[:, None] > np.cumsum(plog[x], axis=1)).sum(1)
    a = np.minimum(a, n_actions - 1)
    r = (rng.random(n_rows) < mu[x, a]).astype(float)
    log = {"context": x, "action": a, "propensity": plog[x, a], "reward": r, "target_action": pi[x]}
    return log, value


def bias_study(keep_rates, n_rows: int = 2000, n_reps: int = 4000, seed: int = 0, **log_kw) -> dict:
    """Bias of the η form (and of the HT form) over keep rates, by simulation (vectorized):
    ``n_reps`` logs of ``n_rows`` rows, the zero-reward rows of each kept at rate ``l``.
    Only the number of kept zero rows depends on ``l`` (``Σ f`` and the nonzero count are
    those of the full log), so one set of logs serves every ``l``.  Returns, per ``l``: the
    mean of V̂_η − V, its Monte Carlo SE, the relative bias, the second-order prediction
    :func:`eta_relative_bias`, the HT form's bias and both RMSEs."""
    rng = np.random.default_rng(seed)
    _, value = simulate_log(rng, 1, **log_kw)
    sf = np.empty(n_reps)
    n1 = np.empty(n_reps)
    for k in range(n_reps):
        log, _ = simulate_log(rng, n_rows, **log_kw)
        f = np.where(log["action"] == log["target_action"], log["reward"] / log["propensity"], 0.0)
        sf[k] = f.sum()
        n1[k] = np.sum(log["reward"] != 0)
    z0 = n_rows - n1
    out = {"keep_rate": [], "bias_eta": [], "se_bias_eta": [], "rel_bias_eta": [], "rel_bias_predicted": [],
           "bias_ht": [], "se_bias_ht": [], "rmse_eta": [], "rmse_ht": [], "value": value, "n_rows": n_rows,
           "n_reps": n_reps}
    q0 = float(np.mean(z0) / n_rows)
    for l in keep_rates:
        kept = rng.binomial(z0.astype(np.int64), l)
        eta = n1 + kept / l
        v_eta = sf / eta
        v_ht = sf / n_rows  # Σ w f / N: the zeros carry no f, so the thinning leaves it alone
        e = v_eta - value
        out["keep_rate"].append(float(l))
        out["bias_eta"].append(float(e.mean()))
        out["se_bias_eta"].append(float(e.std(ddof=1) / np.sqrt(n_reps)))
        out["rel_bias_eta"].append(float(e.mean() / value))
        out["rel_bias_predicted"].append(float(eta_relative_bias(n_rows, q0, l)))
        out["bias_ht"].append(float(np.mean(v_ht - value)))
        out["se_bias_ht"].append(float(np.std(v_ht - value, ddof=1) / np.sqrt(n_reps)))
        out["rmse_eta"].append(float(np.sqrt(np.mean(e * e))))
        out["rmse_ht"].append(float(np.sqrt(np.mean((v_ht - value) ** 2))))
    return out
