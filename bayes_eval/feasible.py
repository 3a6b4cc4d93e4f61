"""What the labels allow: the range of G over every completion of the pool.

Under a deterministic oracle the labeled items' classes are known and every unlabeled
item has *some* class, so the measure on the pool (001 §2.2: G = g(R), R = Σ_x p(x)
Σ_y N_{x,y} ℓ(x, y) over the finite pool) lies between the smallest and the largest
value of g over the pool's completions — without any model, CLT or assumption.  An
estimate outside that range is wrong by at least its distance to it; the importance-weighted
estimate of 001 eq. 1 is not constrained to it (it is a ratio of weighted sums that
ignores what is known exactly), and on imbalanced pools it often leaves it: after a design
has labeled every predicted positive, F1 cannot exceed its value with no positive hidden
among the unlabeled predicted negatives, and the estimate does in 12-33% of AIS runs on
abt-buy, dblp-acm and the demo pool (``benchmarks/results/feasible.md``).

:func:`feasible_range` computes the range exactly for measures whose components are
linear-fractional in R (``Measure.fractional``: precision, recall, F-β, accuracy, the
PR and ROC curves' points, micro-F1, Brier).  For such a component
h(R) = (a·R + a₀)/(b·R + b₀) with a positive denominator, the set of risks over the
completions is the sum over cells of U_x p(x) times the convex hull of the cell's loss
rows ℓ(x, ·) (plus the labeled part); its extremes over that zonotope's hull lie at a
vertex (all U_x unlabeled items of a cell given one class), and Dinkelbach's iteration
(Dinkelbach 1967, *Management Science* 13(7)) finds the best vertex exactly: with
λ = h(R_t), the next vertex maximizes (a − λ b)·R, which is separable over cells; the
gradient of h at R_t is (a − λ b)/(b·R_t + b₀), so each step gives every cell the class
whose loss row has the largest (smallest, for the minimum) gradient product.  It stops
when the vertex repeats (the optimum) — a few steps in practice.  The integer
completions include every vertex, so the range is attained.

:func:`project` clips an :class:`~bayes_eval.estimators.Estimate` onto the range (the
error can only shrink: the truth is in it) and :func:`cut` cuts an interval to it (an
interval centred on the projected estimate keeps its half-widths and loses what the
labels rule out; coverage can only rise, since the truth always lies in the range).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import _config  # noqa: F401

__all__ = ["feasible_range", "project", "cut", "unknown", "blind_spot", "miss_probability", "MAX_WORK", "MAX_STEPS",
           "BLIND_RATE"]

#: Dinkelbach steps at most (the iteration stops when the vertex repeats; 3-6 steps measured)
MAX_STEPS = 50
#: a cell is in the blind spot when its labeled share is below this fraction of the pool's (:func:`blind_spot`)
BLIND_RATE = 0.1
#: cells × classes × loss dims × components above which the range is not computed (a PR
#: curve of 2,049 points over thousands of cells): (-inf, inf) is returned instead
MAX_WORK = 2e8


def _extreme(g, j, sign, r_lab, unl_loss, has_unl, start):
    """(value, next): sign · max over vertices of sign · g(R)[j] by Dinkelbach's iteration, from
    ``start`` (the centre of the completions' hull), and the value one unlabeled item's class
    away from that vertex that lies farthest from it (the extreme itself where no item is
    unlabeled).  NaN where g is undefined at a visited point."""
    def comp(r):
        return jnp.atleast_1d(g(r))[j]

    def choose(r):
        grad = jax.grad(comp)(r)
        # NaN where another component of g is 0/0 (its zero cotangent times inf): not this one's slope
        grad = jnp.where(jnp.isfinite(grad), grad, 0.0)
        return jnp.argmax(sign * jnp.einsum("xcd,d->xc", unl_loss, grad), axis=1)          # (X,)

    def at(a):
        return r_lab + jnp.take_along_axis(unl_loss, a[:, None, None], axis=1)[:, 0, :].sum(0)

    def body(carry):
        a, r, val, _, it = carry
        a_new = choose(r)
        r_new = at(a_new)
        v_new = comp(r_new)
        moved = sign * (v_new - val) > 1e-12 * jnp.maximum(1.0, jnp.abs(val))
        ok = jnp.isfinite(v_new)
        keep = moved & ok
        return (jnp.where(keep, a_new, a), jnp.where(keep, r_new, r), jnp.where(ok, jnp.where(moved, v_new, val), jnp.nan),
                keep, it + 1)

    def cond(carry):
        return carry[3] & jnp.isfinite(carry[2]) & (carry[4] < MAX_STEPS)

    a1 = choose(start)                # the first step is taken whatever it gives: the centre is no completion
    r1 = at(a1)
    a, r, val, _, _ = jax.lax.while_loop(cond, body, (a1, r1, comp(r1), jnp.asarray(True), 1))
    # one item of cell x moved from the vertex's class a_x to c: R + (ℓ(x, c) − ℓ(x, a_x)) p(x)
    # (unl_loss is U_x p(x) ℓ; has_unl guards U_x ≥ 1)
    per_item = unl_loss / jnp.maximum(jnp.asarray(has_unl, unl_loss.dtype), 1.0)[:, None, None]
    move = per_item - jnp.take_along_axis(per_item, a[:, None, None], axis=1)             # (X, C, d)
    vals = jax.vmap(comp)((r + move).reshape(-1, move.shape[-1])).reshape(move.shape[:2])
    ok = (has_unl[:, None] >= 1) & (jnp.arange(move.shape[1])[None, :] != a[:, None]) & jnp.isfinite(vals)
    far = jnp.where(ok, -sign * vals, -jnp.inf).max()
    nxt = jnp.where(jnp.isfinite(far), -sign * far, val)
    return val, nxt


def unknown(m: int, xp=jnp):
    """(4, m): the range where it is not computed, (-inf, inf, -inf, inf): :func:`cut` passes
    intervals through it unchanged."""
    return xp.stack([xp.full(m, -xp.inf), xp.full(m, xp.inf)] * 2)


def feasible_range(g, cells, labeled):
    """(4, m): the lowest and highest G over every completion of the pool given the labels,
    and, for each, the value one unlabeled item's class away from it that lies farthest from it.

    Parameters
    ----------
    g : callable
        ``g(R) -> (m,)``; every component linear-fractional in R (``Measure.fractional``).
    cells : CellTable-like
        ``loss`` (X, C, d), ``weight`` (X,) p(x), ``size`` (X,) items per cell.
    labeled : array, shape (X, C)
        Labeled items per cell and class.

    Returns
    -------
    array, shape (4, m)
        Rows: ``lower``, ``upper``, ``lower_next`` (≥ lower), ``upper_next`` (≤ upper) — the
        next two are what :func:`cut` widens an interval to where it is cut at that end.
        ``(-inf, inf, -inf, inf)`` for a component whose range is undefined (g not finite at
        a completion visited) or not computed (a problem above :data:`MAX_WORK`).
    """
    loss = jnp.asarray(cells.loss)
    x, c, d = loss.shape
    w = jnp.asarray(cells.weight)
    labeled = jnp.asarray(labeled, loss.dtype)
    unl = jnp.maximum(jnp.asarray(cells.size, loss.dtype) - labeled.sum(1), 0.0)
    r_lab = jnp.einsum("x,xc,xcd->d", w, labeled, loss)
    unl_loss = (w * unl)[:, None, None] * loss                                          # (X, C, d)
    centre = r_lab + unl_loss.mean(1).sum(0)
    m = int(jax.eval_shape(lambda r: jnp.atleast_1d(g(r)), centre).shape[0])
    if float(x) * c * (d + c) * m > MAX_WORK:
        return unknown(m)
    # one vmapped search over (component, direction): one copy of the iteration to compile
    js = jnp.tile(jnp.arange(m), 2)
    signs = jnp.repeat(jnp.asarray([-1.0, 1.0]), m)
    val, nxt = jax.vmap(lambda j, sg: _extreme(g, j, sg, r_lab, unl_loss, unl, centre))(js, signs)
    lo, hi, lo_next, hi_next = val[:m], val[m:], nxt[:m], nxt[m:]
    ok = jnp.isfinite(lo) & jnp.isfinite(hi) & jnp.isfinite(lo_next) & jnp.isfinite(hi_next)
    return jnp.where(ok[None, :], jnp.stack([lo, hi, lo_next, hi_next]), unknown(m))


def project(est, feasible):
    """The estimate with its value clipped onto ``feasible`` (4, m; :func:`feasible_range`)
    and the range kept (``Estimate.feasible``).  NaN values stay NaN."""
    v = est.value
    return est._replace(value=jnp.where(jnp.isnan(v), v, jnp.clip(v, feasible[0], feasible[1])), feasible=feasible)


def cut(lower, upper, feasible):
    """An interval cut to what the labels allow; numpy or jax arrays alike.  ``feasible``
    (..., 4, m) as :func:`feasible_range` (or None: the bounds pass unchanged).

    Where an end reaches the range's bound (and is cut to it), the other end is widened to
    at least the value one unlabeled item's class away from that bound: an
    interval pressed against "nothing hidden" that excludes one hidden item makes the bet
    the finite-pool posterior's collapsed interval makes, and is widened the same way
    (:func:`bayes_eval.posterior.resolved_interval`).  Where the range is not known (±inf)
    the bounds pass unchanged."""
    if feasible is None:
        return lower, upper
    xp = jnp if isinstance(lower, jax.Array) or isinstance(feasible, jax.Array) else np
    flo, fhi, flo_next, fhi_next = (feasible[..., k, :] for k in range(4))
    lo, hi = xp.maximum(lower, flo), xp.minimum(upper, fhi)
    # reaching the bound counts (a zero-width interval on it is the same bet); round-off does not decide
    scale = xp.maximum(xp.where(xp.isfinite(flo), xp.abs(flo), 0.0), xp.where(xp.isfinite(fhi), xp.abs(fhi), 0.0))
    tol = 1e-9 * xp.maximum(1.0, scale)
    lo = xp.where(upper >= fhi - tol, xp.minimum(lo, fhi_next), lo)
    hi = xp.where(lower <= flo + tol, xp.maximum(hi, flo_next), hi)
    return lo, hi


def miss_probability(n, labeled, k):
    """P(none of ``k`` items placed uniformly at random among ``n`` is among the ``labeled`` of
    them that carry a label) = C(n − labeled, k) / C(n, k): the chance that labels spread like
    these would not have seen k positives hidden there.  Broadcasts over arrays (the twins
    study, ``benchmarks/interval_study/twins_bound.py``, takes it per run and K); a float for
    scalars."""
    from scipy.special import gammaln   # scipy comes with jax

    n, labeled, k = (np.asarray(a, float) for a in (n, labeled, k))
    free = n - labeled
    logp = gammaln(free + 1) - gammaln(np.maximum(free - k, 0) + 1) - gammaln(n + 1) + gammaln(np.maximum(n - k, 0) + 1)
    out = np.where(k > free, 0.0, np.where(k <= 0, 1.0, np.exp(logp)))
    return float(out) if out.ndim == 0 else out


def blind_spot(size, labeled, p_cell, loss_tables, gs, risks, values=None, rate: float = BLIND_RATE,
               value_range=None) -> dict | None:
    """What the labels have barely seen: the cells labeled at under ``rate`` × the pool's labeled
    share (cells with no label included), and what positives hidden there would do.

    Every interval of useful width rests on a bet about those items: a pool with K of their
    negatives made positive (a *twin*) gives the same labels as this one unless a labeled item
    is among the K, so no method can tell the two apart, and an interval that holds on both must
    span both values (``benchmarks/results/interval_twins_layered.md``: on abt-buy no interval
    holding on its ≤ 50-positive twins is below 6.6 × AIS's RMSE at 1000 labels).  This reports,
    without any model, how large that region is and how much the measure would move if as many
    positives hid there as the labels have found in the whole pool (a doubling; at least one).

    Parameters
    ----------
    size : (X,) items per cell;  labeled : (X, C) labeled items per cell and class;
    p_cell : (X,) p(x) per item;  loss_tables : per measure, (X, C, d) ℓ(x, y);
    gs : per measure, g(R) -> (m,);  risks : per measure, the estimate R̂ (d,);
    values : the estimates shown, all components (g(R̂) projected onto the range, :func:`project`),
    or None for g(R̂);  value_range : (low, high) per component, what the labels allow and the
    measure's bounds (the twin's values are clipped to it: a precision shown at 1.0 read 1.0002), or None.

    Returns
    -------
    dict or None
        None for a pool that is not binary or whose labels cover every cell at ≥ ``rate`` × the
        pool's share.  Keys: ``items``, ``share`` (of the pool), ``cells``, ``items_without_label``
        (in cells with no label at all), ``labels``, ``positives`` (labels there that were
        positive), ``found`` (positive labels in the whole pool), ``hidden`` (the K considered:
        max(found, 1), at most the region's unlabeled items), ``miss_probability`` (:func:`miss_probability`: that the labels there
        would not see K positives placed at random among its items not labeled positive),
        ``values_if_hidden`` (per component: G with K of the region's unlabeled items made
        positive, spread over its cells by their unlabeled items, predictions kept: the estimate
        shown moved by g(R̂ + K ΔR) − g(R̂)), ``rate``.
    """
    size = np.asarray(size, float)
    labeled = np.asarray(labeled, float)
    if labeled.ndim != 2 or labeled.shape[1] != 2 or size.sum() <= 0:
        return None
    lab = labeled.sum(1)
    pool_share = lab.sum() / size.sum()
    region = ((lab / np.maximum(size, 1.0)) < rate * pool_share) & (size > 0)
    if not region.any():
        return None
    unl = np.maximum(size - lab, 0.0) * region
    n_items, n_unl = float(size[region].sum()), float(unl.sum())
    pos_there = float(labeled[region, 1].sum())
    found = float(labeled[:, 1].sum())
    # K: as many as found (at least one), but no more than the region's unlabeled items can hold --
    # on a pool of many positives the region may be smaller than the positives found (stop 79: 146
    # "hidden" among 41 items, an impossible twin, its miss probability 0 and its value off the range)
    k = int(min(max(found, 1.0), round(n_unl)))
    if k < 1:
        return None
    # the twin: K of the region's negatives made positive (planted among its items not labeled positive)
    miss = miss_probability(n_items - pos_there, float(lab[region].sum()) - pos_there, k)
    moved = []
    if n_unl > 0:
        spread = unl / n_unl                                                      # (X,)
        at, with_k = [], []                                                      # g(R̂), g(R̂ + K ΔR)
        for loss, g, r in zip(loss_tables, gs, risks):
            loss, r = np.asarray(loss, float), np.asarray(r, float)
            dr = np.einsum("x,x,xd->d", spread, np.asarray(p_cell, float), loss[:, 1] - loss[:, 0])
            at.extend(np.atleast_1d(np.asarray(g(jnp.asarray(r)), float)))
            with_k.extend(np.atleast_1d(np.asarray(g(jnp.asarray(r + k * dr)), float)))
        shown = np.asarray(at if values is None else values, float)
        twin = shown + np.asarray(with_k) - np.asarray(at)
        if value_range is not None:   # the twin is a completion of the pool: inside what the labels allow
            twin = np.clip(twin, np.asarray(value_range[0], float), np.asarray(value_range[1], float))
        moved = [float(v) if np.isfinite(v) else None for v in twin]
    return {"items": int(round(n_items)), "share": n_items / float(size.sum()), "cells": int(region.sum()),
            "items_without_label": int(round(float(size[region & (lab == 0)].sum()))),
            "labels": int(round(float(lab[region].sum()))), "positives": int(round(pos_there)),
            "found": int(round(found)), "hidden": k, "miss_probability": miss,
            "values_if_hidden": moved, "rate": float(rate)}
