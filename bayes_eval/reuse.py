"""Sample reuse: estimating a measure the design did not draw for from its draws (001 §3.3.1).

Why
---
An importance-sampling design draws item x with probability q(x) and weights its label by
p(x)/q(x); the estimate of R = E_p[ℓ(x, y)] is unbiased for *any* loss ℓ whose support the
proposal covers: q(x) > 0 wherever ℓ(x, y) ≠ 0 at a label x can have (001 §3.3.1).  AIS's
proposal (001 Prop. 2) is zero where the session's own measure has ℓ = 0 at every possible
label -- for F1, the predicted negatives known (or all but known) to be negative.  Another
measure of the same labels, such as the report's PR curve at a threshold below the session's,
counts exactly those items (their ``f_t = 1`` enters the precision's denominator), so its
importance-weighted estimate leaves them out: on a 300-item pool with every item labeled the
report's curve put the precision at the lowest threshold at 0.28 where it is 0.11 (stop 57's
new-user walk).  :func:`reuse_support` says, component by component, whether the draws cover the
measure's support; the report shows the estimate and its CLT band only where they do.

Where they do, the estimate is projected onto what the labels allow and the CLT band cut to it
(:mod:`bayes_eval.feasible`), as a session's own measures are.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["reuse_support", "loss_dims_used"]


def loss_dims_used(g, cells_loss, fill) -> np.ndarray:
    """(m, d) bool: which dimensions of R each component of ``g`` depends on, from the Jacobian
    of g at R = Σ fill × loss (``fill`` (X, C): items per cell and class of one completion, e.g.
    the labeled items plus the unlabeled ones spread evenly over the classes); a NaN derivative
    counts as a dependence."""
    r = np.einsum("xc,xcd->d", np.asarray(fill, np.float64), np.asarray(cells_loss, np.float64))
    jac = np.asarray(jax.jacfwd(lambda x: jnp.atleast_1d(g(x)))(jnp.asarray(r)))
    return ~(np.abs(jac) <= 1e-12)


def reuse_support(g, cells_loss, unlabeled, labeled, q_unlabeled, q_labeled) -> np.ndarray:
    """(m,) bool: the components of G = g(R) whose importance-weighted estimate the draws can give
    -- the proposal positive at every (cell, class) where the loss can be non-zero.

    Parameters
    ----------
    g : callable
        The measure's ``g``.
    cells_loss : array (X, C, d)
        The measure's loss per cell (of the measure's own cells) and class.
    unlabeled : array (X,)
        Unlabeled items per cell (they may have any class).
    labeled : array (X, C)
        Labeled items per cell and class.
    q_unlabeled : array (X,)
        The smallest proposal probability of an unlabeled item of the cell (0 where the
        design never draws it).
    q_labeled : array (X, C)
        The same for a labeled item of each class.
    """
    loss = np.asarray(cells_loss, np.float64)
    nonzero = np.abs(loss) > 0                                                     # (X, C, d)
    possible_unl = (np.asarray(unlabeled) > 0)[:, None] & (np.asarray(q_unlabeled) <= 0)[:, None]
    possible_lab = (np.asarray(labeled) > 0) & (np.asarray(q_labeled) <= 0)
    blind = (possible_unl | possible_lab)[:, :, None] & nonzero                     # never drawn, loss ≠ 0
    dims_blind = blind.any(axis=(0, 1))                                             # (d,)
    used = loss_dims_used(g, loss, np.asarray(labeled, np.float64) + np.asarray(unlabeled, np.float64)[:, None]
                          / loss.shape[1])
    return ~(used & dims_blind[None, :]).any(axis=1)
