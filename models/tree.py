"""Dirichlet-tree model of the oracle response (001 §4), on per-leaf counts.

The pool is partitioned into K score strata ("leaves", in score order) that sit at the
leaves of a complete tree of a given ``depth`` and ``branching`` (001 §5.2 fills CSF bins
into the leaves in breadth-first order, so every subtree is a contiguous run of strata).
If the pool has fewer strata than the tree has leaves, the extra leaves are appended at
the end and hold no items.

Generative model (001 §4.1, 001 §4), classes y = 0..C-1:

* θ ~ Dirichlet(α) — global class proportions;
* for each class y and internal node v, φ_{y,v} ~ Dirichlet(β_{y, children(v)});
  ψ_y(k) = product of the branch probabilities on the path from the root to leaf k;
* an item has class y with probability θ_y and, given y, sits in leaf k with
  probability ψ_y(k).

Hence an item of leaf k has class y with probability π(y|k) ∝ θ_y ψ_y(k).  Everything
here works on counts — ``counts[k, y]`` labeled items of class y in leaf k and
``unlabeled[k]`` unlabeled items in leaf k — never on single items, so the cost grows
with K·C, not with the pool size.

Inference (001 §4):

* :func:`em` — EM / MAP, what 001 §4.2 uses: E-step, the expected class counts of the
  unlabeled items (``unlabeled[k] * π(·|k)``); M-step, the Dirichlet modes given the
  completed counts.
* :func:`gibbs` — an exact data-augmentation Gibbs sampler: unlabeled class counts per
  leaf from Multinomial(U_k, π(·|k)), then θ and every φ from their conjugate Dirichlet
  posteriors.
* :func:`dirichlet_tree_model` / :func:`run_nuts` — NUTS (NumPyro) on the marginal
  likelihood Σ_k [Σ_y n_{k,y} log(θ_y ψ_y(k)) + U_k log Σ_y θ_y ψ_y(k)], for diagnostics
  and as a check of the other two.

:class:`OracleModel` puts this model and simpler alternatives (:func:`dirichlet_tree`,
:func:`flat_dirichlet_tree`, :func:`independent_dirichlet`, :func:`classifier_scores`)
behind one small functional interface, jit- and vmap-compatible.

Mixing and convergence note: when most items are unlabeled, the class split of the
unlabeled items of a leaf is informed mainly by the prior and the few labels, while the
completed-data posterior treats it as known.  Plain EM then converges, and the Gibbs
sampler mixes, at a rate of roughly U_k / (U_k + n_k + β_k − 1) per iteration along that
direction (the fraction of missing information) — close to 1 for the flat tree, whose
leaf pseudo-counts are small.  Hence :func:`em` is accelerated by SQUAREM by default and
the :class:`OracleModel` warm-starts each fit from the previous one.  The Gibbs sampler
stays exact but needs many sweeps per effective draw on large, mostly unlabeled pools
(integrated autocorrelation time ~100 sweeps for θ on a 256-leaf, 54k-item pool with
1000 labels); NUTS on the marginal likelihood does not augment the data and mixes well
there (bulk ESS ≈ number of draws), so :func:`run_nuts` + :func:`draw_unlabeled_counts`
is the better sampler at that scale.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from .. import _config  # noqa: F401  (float64)

__all__ = [
    "TreeSpec",
    "DirichletTreePrior",
    "DirichletTreeParams",
    "IndependentDirichletState",
    "shape_of",
    "check_counts",
    "level_concentrations",
    "log_likelihood",
    "node_concentrations",
    "split_nodes",
    "dirichlet_mean",
    "dirichlet_draws",
    "multinomial_draws",
    "prior_from_scores",
    "prior_mode",
    "predictive",
    "posterior_from_counts",
    "map_from_counts",
    "log_posterior",
    "em",
    "gibbs",
    "draw_unlabeled_counts",
]

Array = Any


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------
class TreeSpec(NamedTuple):
    """Shape of a complete tree; static (hashable Python ints, never traced).

    Parameters
    ----------
    depth : int
        Number of levels below the root (001 §5.2: 8 for "Ours-8", 1 for "Ours-1").
    branching : int
        Children per internal node.  ``depth=1, branching=K`` is the flat model.

    Notes
    -----
    Pass a ``TreeSpec`` to jitted code as a static argument or close over it; the
    functions that take arrays (:func:`em`, :func:`gibbs`, :func:`predictive`) read the
    tree shape from the array shapes instead.
    """

    depth: int
    branching: int

    @property
    def n_leaves(self) -> int:
        """Number of leaves, ``branching ** depth``."""
        return int(self.branching) ** int(self.depth)

    @classmethod
    def flat(cls, n_leaves: int) -> "TreeSpec":
        """The depth-1 tree with ``n_leaves`` leaves (001 §5.2, "Ours-1")."""
        return cls(1, int(n_leaves))


class DirichletTreePrior(NamedTuple):
    """Hyperparameters of the Dirichlet-tree model (001 §4.1).

    Attributes
    ----------
    alpha : array, shape (C,)
        Concentration of θ ~ Dirichlet(α).
    betas : tuple of arrays
        ``betas[l-1]`` has shape (C, b**l): β_{y,v} for the nodes v at depth l
        (l = 1 .. depth), in breadth-first order.  The Dirichlet at a parent at depth
        l-1 is over the ``b`` consecutive entries of its children, i.e. over the last
        axis of ``betas[l-1].reshape(C, b**(l-1), b)``.
    """

    alpha: Array
    betas: tuple


class DirichletTreeParams(NamedTuple):
    """A value of the model parameters (θ, φ).

    Attributes
    ----------
    theta : array, shape (C,)
        Global class proportions.
    phis : tuple of arrays
        ``phis[l-1]`` has shape (C, b**(l-1), b): branch probabilities at the internal
        nodes of depth l-1, each row on the simplex.
    """

    theta: Array
    phis: tuple


class IndependentDirichletState(NamedTuple):
    """Posterior of independent per-leaf Dirichlets, π(·|k) ~ Dir(concentration[k])."""

    concentration: Array


# --------------------------------------------------------------------------------------
# Shapes and small helpers
# --------------------------------------------------------------------------------------
def shape_of(prior_or_params) -> tuple[int, int, int]:
    """(C, depth, branching) from the array shapes of a prior or params."""
    seq = prior_or_params[1]
    depth = len(seq)
    branching = int(seq[0].shape[-1])
    c = int(seq[0].shape[0])
    return c, depth, branching


def _pad_leaves(x: Array, n_leaves: int) -> Array:
    """Pad axis 0 (leaves) with zeros up to ``n_leaves``."""
    x = jnp.asarray(x, dtype=jnp.float64)
    k = x.shape[0]
    if k > n_leaves:
        raise ValueError(f"{k} leaves given but the tree has only {n_leaves} leaves")
    if k == n_leaves:
        return x
    pad = [(0, n_leaves - k)] + [(0, 0)] * (x.ndim - 1)
    return jnp.pad(x, pad)


def check_counts(counts: Array, unlabeled: Array) -> None:
    counts_shape, unl_shape = jnp.shape(counts), jnp.shape(unlabeled)
    if len(counts_shape) != 2:
        raise ValueError(f"counts must have shape (K, C), got {counts_shape}")
    if tuple(unl_shape) != (counts_shape[0],):
        raise ValueError(
            f"unlabeled must have shape (K,) = ({counts_shape[0]},), got {unl_shape}"
        )


def _level_counts(counts_ct: Array, depth: int, branching: int) -> tuple:
    """Subtree counts per level: ``out[l-1]`` (C, b**(l-1), b), from (C, K_tree).

    Summed bottom-up (each level from the one below), so the work is O(K), not
    O(K · depth).  ``out[0].sum(-1)`` is the total per class.
    """
    c = counts_ct.shape[0]
    out = [None] * depth
    cur = counts_ct
    for lvl in range(depth, 0, -1):
        out[lvl - 1] = cur.reshape(c, branching ** (lvl - 1), branching)
        cur = out[lvl - 1].sum(-1)
    return tuple(out)


def _dirichlet_mode(conc: Array) -> Array:
    """Mode of Dirichlet(conc) over the last axis, guarded (001 §4).

    For conc ≥ 1 this is (conc − 1) / Σ(conc − 1).  Entries below 1 are clipped at 0
    (the mode is then on the boundary); if every entry is ≤ 1 the density is maximal at
    no interior point and the uniform vector is returned.
    """
    xp = np if isinstance(conc, np.ndarray) else jnp  # NumPy for a prior built in NumPy (prior_mode, no compiling)
    x = xp.maximum(conc - 1.0, 0.0)
    s = x.sum(-1, keepdims=True)
    n = conc.shape[-1]
    return xp.where(s > 0, x / xp.where(s > 0, s, 1.0), 1.0 / n)


def dirichlet_mean(conc: Array) -> Array:
    return conc / conc.sum(-1, keepdims=True)


def _psi(phis: tuple) -> Array:
    """Leaf probabilities ψ_y(k), shape (C, K_tree), as products down the tree."""
    c = phis[0].shape[0]
    psi = phis[0].reshape(c, -1)
    for phi in phis[1:]:
        psi = (psi[:, :, None] * phi).reshape(c, -1)
    return psi


def _log_psi(phis: tuple) -> Array:
    """log ψ_y(k), shape (C, K_tree), as sums of log branch probabilities."""
    c = phis[0].shape[0]
    out = jnp.log(phis[0]).reshape(c, -1)
    for phi in phis[1:]:
        out = (out[:, :, None] + jnp.log(phi)).reshape(c, -1)
    return out


def _predictive_ct(params: DirichletTreeParams) -> Array:
    """π(y|k) in class-major layout (C, K_tree)."""
    joint = params.theta[:, None] * _psi(params.phis)
    tot = joint.sum(0, keepdims=True)
    fallback = jnp.broadcast_to(params.theta[:, None], joint.shape)
    return jnp.where(tot > 0, joint / jnp.where(tot > 0, tot, 1.0), fallback)


# --------------------------------------------------------------------------------------
# Prior, predictive, conjugate updates
# --------------------------------------------------------------------------------------
def prior_from_scores(
    leaf_probs: Array, spec: TreeSpec, strength: float = 1.0
) -> DirichletTreePrior:
    """Hyperparameters from the classifier's scores (001 §5.2, "Hyperparameters").

    α_y = 1 + strength · Σ_k s(y|k) and, for every non-root node v,
    β_{y,v} = depth(v)² + strength · Σ_k s(y|k) δ_v(k), where δ_v(k) = 1 when v is on the
    path to leaf k (depth(v) = 1 for the root's children).

    Parameters
    ----------
    leaf_probs : array, shape (K, C)
        s(y|k), the mean classifier probability of class y over the items of leaf k
        (0 for an empty leaf).  K ≤ ``spec.n_leaves``; missing leaves count as empty.
    spec : TreeSpec
        Tree shape.
    strength : float, default 1.0
        Multiplier of the score pseudo-counts (1.0 reproduces 001 §5.2).

    Returns
    -------
    DirichletTreePrior
    """
    if isinstance(leaf_probs, jax.core.Tracer) or isinstance(strength, jax.core.Tracer):
        xp = jnp  # inside a compiled function
    else:
        xp = np  # built once per design: NumPy, not a few dozen small compiled programs per CLI command
    leaf_probs = xp.asarray(leaf_probs, dtype=xp.float64)
    if leaf_probs.ndim != 2 or leaf_probs.shape[1] < 2:
        raise ValueError(f"leaf_probs must have shape (K, C) with C >= 2, got {leaf_probs.shape}")
    depth, b = int(spec.depth), int(spec.branching)
    if depth < 1 or b < 2:
        raise ValueError(f"need depth >= 1 and branching >= 2, got {spec}")
    k = leaf_probs.shape[0]
    if k > b**depth:
        raise ValueError(f"{k} leaves given but the tree has only {b**depth} leaves")
    s = xp.pad(leaf_probs, [(0, b**depth - k), (0, 0)]).T  # (C, K_tree)
    c = s.shape[0]
    alpha = 1.0 + strength * s.sum(1)
    betas = tuple(
        float(lvl**2) + strength * s.reshape(c, b**lvl, -1).sum(-1) for lvl in range(1, depth + 1)
    )
    return DirichletTreePrior(alpha, betas)


def level_concentrations(prior: DirichletTreePrior) -> tuple:
    """β reshaped per level to (C, b**(l-1), b)."""
    c, _, b = shape_of(prior)
    return tuple(beta.reshape(c, -1, b) for beta in prior.betas)


def posterior_from_counts(prior: DirichletTreePrior, complete_counts: Array) -> DirichletTreePrior:
    """Conjugate posterior given complete class counts per leaf (001 §4).

    θ | · ~ Dir(α + Σ_k N_{k,·}); φ_{y,v} | · ~ Dir(β_{y,children(v)} + class-y counts in
    each child's subtree).

    Parameters
    ----------
    prior : DirichletTreePrior
    complete_counts : array, shape (K, C)
        Class counts per leaf of all items (K ≤ number of tree leaves).

    Returns
    -------
    DirichletTreePrior
        The posterior, in the same layout as the prior.
    """
    c, depth, b = shape_of(prior)
    lc = _level_counts(_pad_leaves(complete_counts, b**depth).T, depth, b)
    alpha = prior.alpha + lc[0].sum(-1).reshape(c)
    betas = tuple(beta + n.reshape(c, -1) for beta, n in zip(prior.betas, lc))
    return DirichletTreePrior(alpha, betas)


def _map_ct(prior: DirichletTreePrior, n_ct: Array) -> DirichletTreeParams:
    """Dirichlet modes given complete counts in class-major layout (C, K_tree)."""
    c, depth, b = shape_of(prior)
    lc = _level_counts(n_ct, depth, b)
    theta = _dirichlet_mode(prior.alpha + lc[0].sum(-1).reshape(c))
    phis = tuple(_dirichlet_mode(conc + n) for conc, n in zip(level_concentrations(prior), lc))
    return DirichletTreeParams(theta, phis)


def map_from_counts(prior: DirichletTreePrior, complete_counts: Array) -> DirichletTreeParams:
    """Posterior mode of (θ, φ) given complete class counts per leaf (the EM M-step).

    Parameters
    ----------
    prior : DirichletTreePrior
    complete_counts : array, shape (K, C)

    Returns
    -------
    DirichletTreeParams
        Dirichlet modes (α − 1 + n) / Σ(α − 1 + n), guarded as in the notes of
        :func:`em`.
    """
    _, depth, b = shape_of(prior)
    return _map_ct(prior, _pad_leaves(complete_counts, b**depth).T)


def prior_mode(prior: DirichletTreePrior) -> DirichletTreeParams:
    """Mode of the prior: the parameters before any item is seen (001 §4.1).

    Parameters
    ----------
    prior : DirichletTreePrior

    Returns
    -------
    DirichletTreeParams
    """
    return DirichletTreeParams(
        _dirichlet_mode(prior.alpha), tuple(_dirichlet_mode(cc) for cc in level_concentrations(prior))
    )


def predictive(params: DirichletTreeParams, n_leaves: int | None = None) -> Array:
    """Posterior predictive class probabilities of an item in each leaf (001 §4).

    π(y|k) = θ_y ψ_y(k) / Σ_{y'} θ_{y'} ψ_{y'}(k).  A leaf with zero probability under
    every class (possible only at boundary modes) gets θ.

    Parameters
    ----------
    params : DirichletTreeParams
        May carry leading batch axes only through ``jax.vmap``.
    n_leaves : int, optional
        Return only the first ``n_leaves`` leaves (the pool's strata); default all
        ``branching ** depth`` leaves.

    Returns
    -------
    array, shape (K, C)
    """
    out = _predictive_ct(params).T
    return out if n_leaves is None else out[:n_leaves]


@jax.jit
def log_posterior(
    prior: DirichletTreePrior, counts: Array, unlabeled: Array, params: DirichletTreeParams
) -> Array:
    """Unnormalized log posterior density of (θ, φ) given the observed data.

    log Dir(θ; α) + Σ_{y,v} log Dir(φ_{y,v}; β) + Σ_k [Σ_y n_{k,y} log(θ_y ψ_y(k))
    + U_k log Σ_y θ_y ψ_y(k)] (001 §4.2; 001 §4), with respect to the product of
    Lebesgue measures on the simplices.  EM increases it at every iteration.

    Parameters
    ----------
    prior : DirichletTreePrior
    counts : array, shape (K, C)
    unlabeled : array, shape (K,)
    params : DirichletTreeParams

    Returns
    -------
    scalar array
    """
    _, depth, b = shape_of(prior)
    lp = _dirichlet_logpdf(params.theta, prior.alpha)
    for phi, conc in zip(params.phis, level_concentrations(prior)):
        lp = lp + _dirichlet_logpdf(phi, conc).sum()
    return lp + log_likelihood(params, counts, unlabeled, b**depth)


def _dirichlet_logpdf(x: Array, conc: Array) -> Array:
    """Dirichlet log density over the last axis, batched; 0·log 0 = 0."""
    norm = jax.scipy.special.gammaln(conc.sum(-1)) - jax.scipy.special.gammaln(conc).sum(-1)
    return norm + jax.scipy.special.xlogy(conc - 1.0, x).sum(-1)


def log_likelihood(params: DirichletTreeParams, counts: Array, unlabeled: Array, n_leaves: int) -> Array:
    """Σ_k [Σ_y n_{k,y} log(θ_y ψ_y(k)) + U_k log Σ_y θ_y ψ_y(k)], leaves without data
    contributing exactly 0 (also to gradients)."""
    return _log_lik_ct(params, _pad_leaves(counts, n_leaves).T, _pad_leaves(unlabeled, n_leaves))


def _log_lik_ct(params: DirichletTreeParams, n_ct: Array, u: Array) -> Array:
    """:func:`log_likelihood` with padded counts in class-major layout (C, K_tree)."""
    log_joint = jnp.log(params.theta)[:, None] + _log_psi(params.phis)  # (C, K_tree)
    safe = jnp.where(n_ct > 0, log_joint, 0.0)
    lab = jnp.sum(jnp.where(n_ct > 0, n_ct * safe, 0.0))
    log_marg = jax.nn.logsumexp(log_joint, axis=0)
    safe_m = jnp.where(u > 0, log_marg, 0.0)
    return lab + jnp.sum(jnp.where(u > 0, u * safe_m, 0.0))


# --------------------------------------------------------------------------------------
# EM / MAP
# --------------------------------------------------------------------------------------
def _em_map(prior, n_ct, u, m):
    """One EM iteration in the space of expected unlabeled class counts m (C, K_tree).

    Class-major layout throughout (no transposes inside the loop)."""
    return u[None, :] * _predictive_ct(_map_ct(prior, n_ct + m))


def _squarem_extrapolate(m0, m1, m2, u):
    """SQUAREM step (Varadhan & Roland 2008, scheme S3) from two EM steps m0 → m1 → m2.

    The squared extrapolation m0 − 2a r + a² v, with r = m1 − m0, v = m2 − 2 m1 + m0 and
    the S3 step length a = −‖r‖/‖v‖ ≤ −1.  It is affine with weights summing to one,
    so each leaf's expected counts still sum to U_k.  If it leaves the feasible set (a
    count below 10⁻⁶ of its value at m2), the step is backtracked towards the plain
    double EM step, a ← (a − 1)/2, up to 11 times; a = −1 is m2 itself.  No objective
    is evaluated: it cost as much as the EM steps and, in a sweep over random trees,
    priors and data, made the iteration no more reliable than this backtracking.
    """
    r = m1 - m0
    v = m2 - 2.0 * m1 + m0
    rn = jnp.sqrt(jnp.sum(r * r))
    vn = jnp.sqrt(jnp.sum(v * v))
    a = jnp.minimum(jnp.where(vn > 0, -rn / jnp.where(vn > 0, vn, 1.0), -1.0), -1.0)
    steps = -1.0 + (a + 1.0) / 2.0 ** jnp.arange(12.0)
    cand = m0 - 2.0 * steps[:, None, None] * r + (steps**2)[:, None, None] * v
    feasible = jnp.all(cand >= 1e-6 * m2, axis=(1, 2))
    j = jnp.argmax(feasible)  # the longest feasible step; 0 if none is
    mx = jnp.where(feasible[j], cand[j], m2)
    cols = mx.sum(0, keepdims=True)
    return jnp.where(cols > 0, mx * (u[None, :] / jnp.where(cols > 0, cols, 1.0)), m2)


def _squarem_loop(prior, n_ct, u, m, n_cycles):
    """``n_cycles`` SQUAREM cycles (two EM steps, extrapolation, one stabilizing EM step).

    Written as a loop of 3·n_cycles iterations with exactly one EM step each (a small
    state machine over the phase i mod 3): XLA on CPU ran a loop body holding three EM
    steps ~4x slower per step than a body holding one.
    """

    def body(i, state):
        m0, m1, last = state
        phase = i % 3
        x = jnp.where(
            phase == 0, m0, jnp.where(phase == 1, m1, _squarem_extrapolate(m0, m1, last, u))
        )
        y = _em_map(prior, n_ct, u, x)
        y = jnp.where(jnp.all(jnp.isfinite(y)), y, last)
        return jnp.where(phase == 2, y, m0), jnp.where(phase == 0, y, m1), y

    return lax.fori_loop(0, 3 * n_cycles, body, (m, m, m))[0]


@functools.partial(jax.jit, static_argnames=("n_iter", "accelerate"))
def em(
    prior: DirichletTreePrior,
    counts: Array,
    unlabeled: Array,
    init: DirichletTreeParams | None = None,
    n_iter: int = 100,
    accelerate: bool = True,
) -> DirichletTreeParams:
    """MAP estimate of (θ, φ) by expectation–maximization (001 §4.2).

    E-step: the expected class counts of the unlabeled items of leaf k are
    ``unlabeled[k] * π(·|k)`` under the current parameters.  M-step: the Dirichlet modes
    (α − 1 + n) / Σ(α − 1 + n) of θ and of every φ_{y,v} given the completed counts (the
    conjugate updates of 001 §4).

    Parameters
    ----------
    prior : DirichletTreePrior
    counts : array, shape (K, C)
        Labeled items per leaf and class (K ≤ tree leaves; float or int).
    unlabeled : array, shape (K,)
        Unlabeled items per leaf.
    init : DirichletTreeParams, optional
        Warm start; default :func:`prior_mode` (whose E-step already splits the items of
        an unlabeled leaf by the prior predictive, close to its fixed point).
    n_iter : int, default 100
        Number of iterations (static; a fixed count keeps the cost predictable under
        ``vmap``/``scan``).  With ``accelerate`` one iteration is a SQUAREM cycle of
        three EM steps.
    accelerate : bool, default True
        Use SQUAREM (Varadhan & Roland 2008) on the expected counts, with feasibility
        backtracking (see ``_squarem_extrapolate``); False runs plain EM.

    Returns
    -------
    DirichletTreeParams

    Notes
    -----
    With 001 §5.2 hyperparameters every α, β ≥ 1, so the modes are well defined; a
    Dirichlet whose parameters all sit at ≤ 1 (an empty subtree of a flat tree with zero
    scores) gets the uniform vector instead of 0/0.  Plain EM converges linearly with
    rate about U_k / (U_k + n_k + β_k − 1) along the class split of a heavily unlabeled
    leaf (the fraction of missing information): close to 1 for the flat tree, whose
    leaf pseudo-counts are small, which is why SQUAREM is the default.
    """
    check_counts(counts, unlabeled)
    _, depth, b = shape_of(prior)
    n_ct = _pad_leaves(counts, b**depth).T
    u = _pad_leaves(unlabeled, b**depth)
    params = prior_mode(prior) if init is None else jax.tree.map(jnp.asarray, init)
    m = u[None, :] * _predictive_ct(params)
    if accelerate:
        m = _squarem_loop(prior, n_ct, u, m, n_iter)
    else:
        m = lax.fori_loop(0, n_iter, lambda _, x: _em_map(prior, n_ct, u, x), m)
    return _map_ct(prior, n_ct + m)


# --------------------------------------------------------------------------------------
# Gibbs sampler
# --------------------------------------------------------------------------------------
def _multinomial(key, n, p):
    """Multinomial(n_k, p_k) counts per row of p (K, C), as float64; one binomial for C=2."""
    if p.shape[-1] == 2:
        m1 = jax.random.binomial(key, n, jnp.clip(p[:, 1], 0.0, 1.0), dtype=jnp.float64)
        return jnp.stack([n - m1, m1], axis=-1)
    return jax.random.multinomial(key, n, p, dtype=jnp.float64)


def node_concentrations(prior: DirichletTreePrior) -> Array:
    """β of all internal nodes' children, (C, n_internal, b), nodes in breadth-first order."""
    return jnp.concatenate(level_concentrations(prior), axis=1)


def split_nodes(phi_nodes: Array, depth: int, branching: int) -> tuple:
    """Inverse of the breadth-first concatenation: per-level (…, C, b**(l-1), b) arrays."""
    out, start = [], 0
    for lvl in range(1, depth + 1):
        n = branching ** (lvl - 1)
        out.append(phi_nodes[..., start : start + n, :])
        start += n
    return tuple(out)


def _draw_params(key, prior, complete_ct):
    """θ and every φ from their Dirichlet posteriors given complete counts (C, K_tree).

    All Dirichlets are drawn with a single log-gamma call (normalized per group), which
    keeps compilation and run time low.
    """
    c, depth, b = shape_of(prior)
    lc = _level_counts(complete_ct, depth, b)
    theta_conc = prior.alpha + lc[0].sum(-1).reshape(c)
    node_conc = node_concentrations(prior) + jnp.concatenate(lc, axis=1)
    lg = jax.random.loggamma(key, jnp.concatenate([theta_conc, node_conc.reshape(-1)]))
    theta = jax.nn.softmax(lg[:c])
    phi = jax.nn.softmax(lg[c:].reshape(node_conc.shape), axis=-1)
    return DirichletTreeParams(theta, split_nodes(phi, depth, b))


def _gibbs_sweep(key, prior, counts_ct, unl_p, params):
    """One sweep; returns the next parameters, and π and m drawn at the current ones."""
    k_m, k_p = jax.random.split(key)
    pi = _predictive_ct(params).T  # (K_tree, C)
    m = _multinomial(k_m, unl_p, pi)  # (K_tree, C)
    new = _draw_params(k_p, prior, counts_ct + m.T)
    return new, pi, m


def gibbs(
    key: Array,
    prior: DirichletTreePrior,
    counts: Array,
    unlabeled: Array,
    n_draws: int,
    n_warmup: int = 500,
    init: DirichletTreeParams | None = None,
    thin: int = 1,
) -> dict:
    """Exact conjugate (data-augmentation) Gibbs sampler for the Dirichlet tree.

    Each sweep draws the unlabeled class counts per leaf, m_k ~ Multinomial(U_k, π(·|k))
    (a binomial for C = 2, sequential binomials otherwise), then θ ~ Dir(α + Σ_k (n_k +
    m_k)) and every φ_{y,v} ~ Dir(β_{y,children(v)} + subtree counts of class y)
    (001 §4).

    Parameters
    ----------
    key : PRNG key
    prior : DirichletTreePrior
    counts : array, shape (K, C)
        Labeled items per leaf and class.
    unlabeled : array, shape (K,)
        Unlabeled items per leaf (integer valued).
    n_draws : int
        Draws kept (static).
    n_warmup : int, default 500
        Sweeps discarded first (static).
    init : DirichletTreeParams, optional
        Starting point; default the EM mode (:func:`em`), which sits in the bulk of the
        posterior when the data are plentiful.
    thin : int, default 1
        Keep every ``thin``-th sweep (static); ``n_warmup + n_draws * thin`` sweeps run.

    Returns
    -------
    dict
        ``"theta"`` (n, C), ``"phis"`` (tuple of (n, C, b**(l-1), b)), ``"pi"``
        (n, K, C) — π(y|k) at each draw — and ``"unlabeled_counts"`` (n, K, C) — the
        class counts of the unlabeled items drawn from Multinomial(U_k, π(·|k)) of the
        same draw.  Each draw (θ, φ, m) is a draw of the joint posterior.

    Notes
    -----
    The chain is exact but mixes slowly when leaves hold many unlabeled items and few
    labels: the lag-1 autocorrelation of a leaf's class split is about
    U_k / (U_k + n_k + β pseudo-counts), as for EM (see :func:`em`).  On a 256-leaf,
    54k-item pool with 1000 labels the integrated autocorrelation time of θ was
    ~100 sweeps; check ESS (``arviz.ess``) and thin, or use :func:`run_nuts` with
    :func:`draw_unlabeled_counts`, which has no such problem.
    """
    check_counts(counts, unlabeled)
    counts = jnp.asarray(counts, dtype=jnp.float64)
    unlabeled = jnp.asarray(unlabeled, dtype=jnp.float64)
    # the EM start is computed by its own jitted function (compiled once per shape)
    params = em(prior, counts, unlabeled) if init is None else jax.tree.map(jnp.asarray, init)
    return _gibbs_impl(key, prior, counts, unlabeled, params, n_draws, n_warmup, thin)


@functools.partial(jax.jit, static_argnames=("n_draws", "n_warmup", "thin"))
def _gibbs_impl(key, prior, counts, unlabeled, params, n_draws, n_warmup, thin):
    k = counts.shape[0]
    _, depth, b = shape_of(prior)
    counts_ct = _pad_leaves(counts, b**depth).T
    unl_p = _pad_leaves(unlabeled, b**depth)
    n_total = n_warmup + n_draws * thin

    # One scan over every sweep (a single copy of the sweep in the compiled program);
    # sweep i writes its draw into slot (i - n_warmup) // thin, so the last sweep of each
    # thinning block is the one kept and warm-up sweeps write into slot 0 first.
    # A kept draw is (θ, φ) at the start of a sweep with the π and m drawn from them,
    # so that m | π ~ Multinomial(U, π) within each draw, as for the other models.
    leaf_shape = (n_draws, b**depth, counts.shape[1])
    buf0 = (
        jax.tree.map(lambda x: jnp.zeros((n_draws,) + x.shape, x.dtype), params),
        jnp.zeros(leaf_shape, jnp.float64),
        jnp.zeros(leaf_shape, jnp.float64),
    )

    def write(buf, x, slot):
        return lax.dynamic_update_index_in_dim(buf, x, slot, 0)

    def body(carry, xs):
        p, (buf_p, buf_pi, buf_m) = carry
        i, key_t = xs
        p_next, pi, m = _gibbs_sweep(key_t, prior, counts_ct, unl_p, p)
        slot = jnp.clip((i - n_warmup) // thin, 0, n_draws - 1)
        buf_p = jax.tree.map(lambda bb, x: write(bb, x, slot), buf_p, p)
        return (p_next, (buf_p, write(buf_pi, pi, slot), write(buf_m, m, slot))), None

    (_, (ps, pis, ms)), _ = lax.scan(
        body, (params, buf0), (jnp.arange(n_total), jax.random.split(key, n_total))
    )
    return {
        "theta": ps.theta,
        "phis": ps.phis,
        "pi": pis[:, :k],
        "unlabeled_counts": ms[:, :k],
    }


@jax.jit
def multinomial_draws(key: Array, unlabeled: Array, pis: Array) -> Array:
    """m[i, k] ~ Multinomial(U_k, pis[i, k]) for a batch of draws pis (n, K, C)."""
    unl = jnp.asarray(unlabeled, dtype=jnp.float64)
    keys = jax.random.split(key, pis.shape[0])
    return jax.vmap(_multinomial, in_axes=(0, None, 0))(keys, unl, pis)


@jax.jit
def dirichlet_draws(key: Array, conc: Array, n_draws_like: Array) -> Array:
    """n Dirichlet(conc[k]) draws per row of conc (K, C) -> (n, K, C), via log-gammas."""
    n = n_draws_like.shape[0]
    lg = jax.random.loggamma(key, jnp.broadcast_to(conc, (n,) + conc.shape))
    return jax.nn.softmax(lg, axis=-1)


def draw_unlabeled_counts(key: Array, params: DirichletTreeParams, unlabeled: Array) -> dict:
    """Posterior predictive class counts of the unlabeled items, given parameter draws.

    For draws (θ, φ) of the posterior (e.g. :func:`params_from_samples` of a NUTS run),
    m_k ~ Multinomial(U_k, π(·|k)) per draw — completing the pool for the finite-pool
    posterior of a measure (001 §4).

    Parameters
    ----------
    key : PRNG key
    params : DirichletTreeParams
        With one leading draw axis.
    unlabeled : array, shape (K,)

    Returns
    -------
    dict
        ``"pi"`` (n, K, C) and ``"unlabeled_counts"`` (n, K, C).
    """
    unl = jnp.asarray(unlabeled, dtype=jnp.float64)
    k = unl.shape[0]
    n = params.theta.shape[0]
    del n
    pis = _batched_predictive(params, k)
    return {"pi": pis, "unlabeled_counts": multinomial_draws(key, unl, pis)}


_batched_predictive = jax.jit(jax.vmap(predictive, in_axes=(0, None)), static_argnums=1)
