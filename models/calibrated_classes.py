"""The calibrated model for pools of several classes: a two-level Dirichlet tree whose top
split (the unit's top class or another) is the calibrated Beta-binomial model.

Why
---
With C > 2 classes the library offered no Bayesian interval (stop 52): 001 §4's Dirichlet tree
over score strata, the only model for several classes, put the unlabeled items' classes near the
pool's class shares -- its score prior (each leaf's mean class probability against depth²
pseudo-counts) is nearly flat over the leaves -- and on a 3-class pool whose accuracy is 0.87 its
posterior accuracy was 0.36-0.74 with no interval covering.  What a classifier of several
classes tells about an unlabeled item is mostly *whether its top class is right*, and how often
that holds falls with the classifier's confidence: the binary question the calibrated model of
:mod:`bayes_eval.models.calibrated` answers well.

Model
-----
Every unit u (a design cell; its items share a predicted class, ``strata.stratify``) has a top
class t_u = argmax_c s(c|u) of its mean classifier probabilities (the predicted class where the
probabilities decide the prediction) and z_u = logit s(t_u|u).  Then, as a Dirichlet tree of
depth two (001 §4.1: a node's branch probabilities are Dirichlet, leaves are classes)

    top split     ρ_u = P(y = t_u | u) ~ Beta(κ μ_u, κ (1 − μ_u)),
                  μ_u = sigmoid(a + b z_u + d_band(u) + e_{t_u}),  e_t ~ N(0, GROUP_SCALE²)
                  -- the calibrated model, with its priors, bands and sampler, on the counts
                  (labels ≠ t_u, labels = t_u) of each unit, and one offset e_t of the curve per
                  top class (:data:`CLASS_OFFSETS`, below); the bands' walk d at the fixed scale
                  :data:`TOP_BAND_SCALE` (the binary model learns it; stop 63, below);
    other classes φ_t = P(y = c | y ≠ t, top class t) ~ Dirichlet(α_t + η),  one per top class t,
                  α_t(c) = m (C − 1) × [w share_t(c) + (1 − w) rev_t(c)]  (m (C − 1) pseudo-counts in all,
                  the mass m learned on {0.3, 1}: :data:`SHARE_MASSES`, uniform),
                  share_t(c) the classifier's mean share of c among the classes other than t over
                  the units of top class t, rev_t(c) = N̂(c → t) / Σ_c' N̂(c' → t) the labels'
                  reverse confusion (below), w learned on {0, ¼, ½, ¾, 1} (:data:`SHARE_WEIGHTS`, uniform)
                  where the shares are prediction rates (pred + confidence), w = 1 where class
                  probabilities set them;
    spread        η ≥ 0, pseudo-counts every other class gets beyond the shares, uniform over
                  log η on a grid of [0.001, 10] (:data:`SPREAD_GRID`), shared by all top classes;

π(c|u) = ρ_u [c = t_u] + (1 − ρ_u) φ_{t_u}(c).  Given (a, b, κ, d) the top split is conjugate; the
posterior of (w, m, η) is exact on their grid (the wrong labels' Dirichlet-multinomial likelihood, row
by row) and φ_t given (w, m, η) is conjugate, so ``sample`` draws (a, b, log κ, d) as the binary model
does (Laplace-t importance resampling), then ρ_u, (w, m, η) and φ_t exactly.  The errors' split is shared by
all units of a top class: a unit's own wrong labels are few, while which classes a top class is
confused with is what the labels of all its units say.

Why the spread: where the pool gives only the predicted class and its confidence
(``scores.prior_of_classes``), the shares are the classifier's prediction rates -- a guess at
which classes a top class is confused with.  A class predicted for 0.5% of the pool then got
0.02 of the C − 1 pseudo-counts, a Dirichlet component far below one, which all but rules the
class out of every top class's errors: with a rare class that is really 1-4% of them the
posterior put too few of its items among the unlabeled (the interval of macro-F1 missed high,
0.84-0.87 of 100 runs; ``benchmarks/results/several_classes.md``).  Spreading every class
evenly (α = 1) put too many there (0.62-0.76, missed low).  η is learned from where the wrong
labels fall: small where they fall as the shares say, large where they reach classes the
shares all but excluded (0.94-0.96 over 300 runs; the pools with class probabilities or only
common classes unchanged within their SE).

Why the reverse confusion (stop 56): the shares are prediction rates where the pool gives only
pred + confidence, and they name the wrong class when a top class is confused most with classes
the classifier seldom predicts.  On stop 55's ``conf4`` top class 1's errors are 4 / 39 / 58% classes
0 / 2 / 3 while the shares gave class 0 81% of the pseudo-counts; η cannot move them (it adds the same
to every class), and at 200 labels the interval of macro-F1 missed high (0.84-0.88 of 300 runs).
Confusions run both ways (9 / 13 items between classes 0 and 1 there, 94 / 104 between 1 and 2), so
where top class c's items turn out to be class t, top class t's errors are likely class c.  N̂(c → t),
the pool's items of top class c that are class t, is estimated from the labels: each unit's labels
on t scaled by the unit's size over its labels (a ratio estimate per unit, 000 §2's Horvitz-Thompson
idea with the unit's own sampling rate; units without labels count none).  It is a *share*, not a
count: the prior keeps C − 1 pseudo-counts whatever the budget, where raw reverse labels as
pseudo-counts grew with the budget (AIS labels a rare class's items far beyond their share) and
drifted low (``conf5`` 0.83 at 1000 labels).  Row t's prior uses only the other rows' labels, so no
label counts twice -- an empirical-Bayes coupling of the rows: the simulation-based calibration of
the slow tier draws φ from the shares' prior and checks the model as used against it (coverage,
not exactness).  Where the pool gives class probabilities the shares say which classes a class is
confused with, and they are kept as they are (w = 1): the estimate replaces only what pred +
confidence cannot say (on the pools with probabilities the mix moved nothing beyond its SE, and
``rare5``'s coverage 0.7-2 points down).  Measured on 300 runs per pool (``benchmarks/results/
several_classes.md`` "Stop 56"): ``conf4`` 0.877 / 0.923 / 0.943 → 0.913 / 0.947 / 0.960 at 200 / 500 /
1000 labels, ``conf5`` 0.94-0.96 as before at 7-10% less width.

Why w is learned (stop 64): the report's "Each class" table reads each class's F1, precision and
recall from this posterior, and on the pools of pred + confidence the dominant class's recall interval
missed: with w fixed at ½, a top class whose errors avoid the class predicted most (``conf4``: top
class 2's are 98% class 1, its prediction rates give class 0 two thirds of the rest) kept about one
pseudo-count on it, and ~10 wrong labels at 200 cannot outweigh that in every row, so the posterior
hid ~20 class-0 items among the other classes' errors where there are ~10.  Class 0's recall interval
held its truth in 12 / 69 / 84 of 100 AIS runs at 200 / 500 / 1000 labels (``shiftconf4``: 19 / 72 / 82),
its F1's in 54 / 83 / 88 (15 / 58 / 74).  The prediction rates are right on some pools and the reverse
confusion on others, and the wrong labels say which: their Dirichlet-multinomial likelihood under
α_t(w) + η, summed over the rows, is the exact posterior of (w, η) on the product grid, as it was of η
alone.  Same runs, learned w: class 0's recall 89 / 95 / 90 and F1 93 / 99 / 94 (``shiftconf4`` recall
69 / 85 / 88, F1 69 / 87 / 91); ``conf5``'s classes 1-2 up 4-5 points where they were low, macro-F1
0.93 / 0.94 / 0.97 (was 0.93 / 0.91 / 0.95) on ``conf4``, within its SE on ``conf5``, ``shiftconf4``
and ``flat3`` (``benchmarks/results/several_classes.md``, "Stop 64").  Stop 56 had measured it on
macro-F1 alone, where the dominant class's F1 near 1 barely moves the mean, and kept w = ½.  A row
whose reverse confusion the labels leave unestimated (at 200 labels about half the runs of
``shiftconf4``, for top classes 2 and 3: their errors' classes are rarely mislabeled the other way)
fell back to the prediction rates whatever w; it falls back to the even split now: ``shiftconf4``
class 0's recall at 200 labels 0.69 -> 0.89 (F1 0.69 -> 0.86) on the same 100 runs, ``conf4``,
``conf5`` and ``flat3`` within a run or two.

Why the mass is learned (stop 65): with the true error split in place of the posterior's (a diagnostic,
``benchmarks/interval_study/error_split_variants.py true-split``) the classes' recall intervals that still
missed all held: ``shiftconf4`` class 1's at 200 labels 0.76 -> 0.90 of 100 runs, ``conf5`` class 3's
0.86 / 0.90 / 0.88 -> 0.99 / 0.96 / 0.97 -- the misses were the error split's, not the top split's.  Where a
top class's errors fall on a class neither base favours (``conf5``'s top class 2: 59% of its errors are
class 3, the prediction rates say 3%, the reverse confusion 25%; ``shiftconf4``'s top classes 2 and 3, whose
errors are 95-99% class 1, where the rates say 27% and the reverse confusion is often unestimated at 200
labels), C − 1 pseudo-counts held the split off the row's own wrong labels.  The mass m learned on {0.3, 1}
lets such a row follow its labels: on the same 100 runs ``shiftconf4`` class 1's recall at 200 labels 0.76 ->
0.83, ``conf5`` classes 2-4's at 200 0.89 / 0.86 / 0.90 -> 0.92 / 0.92 / 0.94, ``conf4``'s macro-F1 0.93 /
0.94 / 0.97 -> 0.95 / 0.95 / 0.98, widths within 3%.  A grid reaching 0.1 and 3 gained as much on
``shiftconf4`` but cost ``conf5`` 1-3 points (stop 55's finding with the shares alone: with a small mass the
spread η's even pseudo-counts weigh more); one w per row left class 1's recall where it was and lost class
0's (0.89 -> 0.81); one mass per row gained less on ``conf5``; the wrong labels reweighted by their units'
sampling rates moved nothing (``benchmarks/results/several_classes.md``, "Stop 65").

Why an offset per top class (stop 57): a classifier is seldom as right as it says for every class
alike -- one trained on balanced classes and run on a pool where some are rare predicts the rare ones
too often and too confidently.  With one curve for all classes the labels of the common classes set
the level of the rare ones' unlabeled units: on a 4-class pool scored that way (``shift4``,
``shiftconf4`` of ``benchmarks/interval_study/several_classes.py``: the least common class right 0.80
of the time at a mean confidence of 0.91, the second 0.98 at 0.93) a new user's per-class precision
intervals excluded even the labeled items' own share of right predictions, and macro-F1's covered
0.92 / 0.96 / 0.82 of 100 AIS runs at 200 / 500 / 1000 labels (posterior mean 0.008 low at 1000).
With the offsets: 0.94 / 0.99 / 0.94, and 7-18% narrower (the shared κ no longer absorbs the classes'
misfit).  The offsets are a ridge around the shared curve, N(0, 1) in logit units: a class with few
labels stays near the curve of the others.

Why the band walk's scale fixed (stop 63): the binary model learns the scale s of its band offsets'
random walk over 0.25-4 (``calibrated.BAND_SCALE``; it gained on the misspecified binary pools).  On the
300-run record of several classes (``benchmarks/results/several_classes.md``, "Stop 62" and "Stop 63")
the learned s moved no pool's macro-F1 coverage beyond 1.6 binomial SE but ``shiftconf4``'s at 200 labels
(0.940 -> 0.907, 2.5 SE), at the same width, and it cost five fits of the curve per posterior instead of
one (the several-class stopping runs 1.6-1.8 × slower): the top split keeps s = 1, stop 57's model.

With C = 2 this reduces to the binary calibrated model up to which class the curve follows; the
registry keeps the binary model for C = 2 (``models/registry.py``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..posterior import multinomial_counts
from .calibrated import BANDS, POSTERIOR_PRIOR, calibrated_model

__all__ = ["calibrated_classes_model", "top_classes", "error_prior", "error_base", "reverse_confusion",
           "error_posterior", "top_split", "classes_pi", "wrong_labels", "spread_alphas", "spread_log_weights", "grid_pair", "grid_point",
           "spread_log_likelihood", "unit_sizes", "prediction_rate_rows", "ClassesState", "SPREAD_GRID", "SHARE_WEIGHTS", "SHARE_MASSES", "TOP_BAND_SCALE"]

#: η, the pseudo-counts every other class gets in a top class's error split beyond the
#: classifier's shares (α_t(c) = (C − 1) share_t(c) + η): 25 values, uniform over log η on
#: [0.001, 10]; its posterior, jointly with w's and m's (:data:`SHARE_WEIGHTS`, :data:`SHARE_MASSES`), is exact on the grid
#: (:func:`error_posterior`; :func:`spread_log_weights` is η's alone for one fixed base).
SPREAD_GRID = np.logspace(-3.0, 1.0, 25)

#: w, the classifier's share in the error split's prior (1 − w: the labels' reverse confusion,
#: :func:`error_base`), learned beside η on this grid (a uniform prior over the pairs, their posterior
#: exact: :func:`error_posterior`; stop 64).  Fixed at 0.5 before (stop 55): on ``conf4`` class 0's
#: recall interval held its truth in 12 / 69 / 84 of 100 runs at 200 / 500 / 1000 labels, learned
#: 89 / 95 / 90 (the module docstring, "Why w is learned")
SHARE_WEIGHTS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])

#: m, the error split prior's mass in units of C − 1 pseudo-counts (α_t = m (C − 1) [w share_t +
#: (1 − w) rev_t] + η), learned beside (w, η) on this grid (uniform; stop 65).  1 alone before: where a
#: top class's errors fall on a class neither the rates nor the reverse confusion favour (``conf5``'s
#: top class 2, 59% of its errors class 3, which both put at 3-25%), C − 1 pseudo-counts held the split
#: off what the row's own wrong labels say, and the classes' recall intervals missed above (the module
#: docstring, "Why the mass is learned")
SHARE_MASSES = np.array([0.3, 1.0])

#: one offset of the calibration curve per top class (``calibrated.GROUP_SCALE``): a class the
#: classifier is more confident in than it is right gets its own level (stop 57)
CLASS_OFFSETS = True

#: the band offsets' random-walk scale s of the top split's curve, fixed (the binary model learns s
#: over ``calibrated.BAND_SCALE``; stop 63): on the 300-run several-class record the learned s moved no
#: pool's coverage beyond its SE but one cell the wrong way (``shiftconf4`` at 200 labels, 0.940 ->
#: 0.907) at the same width, and cost five fits of the curve per posterior instead of one
#: (``benchmarks/results/several_classes.md``, "Stop 62" and "Stop 63"); a sequence learns it again
TOP_BAND_SCALE = 1.0


class ClassesState(NamedTuple):
    """The model's fit state: the binary calibrated model's on the top split, and the units'
    sizes (labeled + unlabeled items) that the reverse confusion's estimate scales by (zeros
    before the first fit: the prior is the classifier's shares)."""
    inner: Any
    unit_size: jnp.ndarray


def top_classes(leaf_probs) -> np.ndarray:
    """(K,) the top class argmax_c s(c|k) of each unit."""
    return np.asarray(leaf_probs, np.float64).argmax(1)


def error_prior(leaf_probs, top=None) -> np.ndarray:
    """(C, C) α_t of the other classes' Dirichlet per top class t (row t; α_t(t) = 0): C − 1
    pseudo-counts spread as the classifier's mean shares of the other classes over the units
    of top class t, evenly where no unit has top class t."""
    p = np.asarray(leaf_probs, np.float64)
    c = p.shape[1]
    top = top_classes(p) if top is None else np.asarray(top)
    alpha = np.zeros((c, c))
    for t in range(c):
        others = np.delete(np.arange(c), t)
        rows = p[top == t][:, others]
        share = rows.mean(0) if rows.shape[0] else np.ones(c - 1)
        share = np.clip(share, 1e-12, None)
        alpha[t, others] = (c - 1) * share / share.sum()
    return alpha


def top_split(leaf_probs, counts=None):
    """The binary problem of the top split: (K, 2) probabilities (off, on the top class) and, with
    ``counts`` (K, C), the (K, 2) labeled counts off and on each unit's top class."""
    p = np.asarray(leaf_probs, np.float64)
    top = top_classes(p)
    p_top = p[np.arange(p.shape[0]), top]
    lp2 = np.stack([1.0 - p_top, p_top], axis=1)
    if counts is None:
        return lp2
    counts = jnp.asarray(counts, dtype=jnp.float64)
    n_top = jnp.sum(counts * jnp.asarray(np.eye(p.shape[1])[top]), axis=1)
    return lp2, jnp.stack([counts.sum(1) - n_top, n_top], axis=1)


def wrong_labels(leaf_probs, counts):
    """(C, C): the labels of the units of top class t (row t) that fell on class c ≠ t."""
    p = np.asarray(leaf_probs, np.float64)
    c = p.shape[1]
    top = top_classes(p)
    return jax.ops.segment_sum(jnp.asarray(counts, dtype=jnp.float64) * (1.0 - jnp.asarray(np.eye(c)[top])),
                               jnp.asarray(top), num_segments=c)


def spread_alphas(alpha0, grid=None):
    """(G, C, C): the error split's Dirichlet parameters α_t + η on every other class, for each η
    of the grid (:data:`SPREAD_GRID`)."""
    grid = jnp.asarray(SPREAD_GRID if grid is None else grid, dtype=jnp.float64)
    alpha0 = jnp.asarray(alpha0, dtype=jnp.float64)
    return alpha0[None] + grid[:, None, None] * (alpha0 > 0)[None]


def spread_log_weights(alpha0, wrong, grid=None):
    """(G,) the posterior of η over the grid (uniform prior over log η): the wrong labels'
    Dirichlet-multinomial likelihood, row by row (exact on the grid)."""
    return jax.nn.log_softmax(spread_log_likelihood(alpha0, wrong, grid))


def spread_log_likelihood(alpha0, wrong, grid=None):
    """(G,) the wrong labels' Dirichlet-multinomial log likelihood under α_t + η for each η of
    the grid, summed over the rows t (unnormalised over the grid)."""
    a = spread_alphas(alpha0, grid)
    wrong = jnp.asarray(wrong, dtype=jnp.float64)
    on = (a > 0)
    a_safe = jnp.where(on, a, 1.0)
    rows = (jax.scipy.special.gammaln(a.sum(-1)) - jax.scipy.special.gammaln(a.sum(-1) + wrong.sum(-1))
            + jnp.sum(jnp.where(on, jax.scipy.special.gammaln(a_safe + wrong[None]) - jax.scipy.special.gammaln(a_safe),
                                0.0), axis=-1))
    return rows.sum(-1)


def reverse_confusion(leaf_probs, counts, unit_size):
    """(C, C) N̂(c → t) at [t, c]: the pool's items of top class c that are class t ≠ c, estimated
    from each unit's labels on t scaled by the unit's size over its labels (units without labels
    count none; 000 §2's ratio estimate with the unit's own sampling rate).  Row t is what the
    other top classes' labels say about top class t's errors (see the module docstring)."""
    counts = jnp.asarray(counts, dtype=jnp.float64)
    n = counts.sum(1)
    scale = jnp.where(n > 0, jnp.asarray(unit_size, dtype=jnp.float64) / jnp.maximum(n, 1.0), 0.0)
    return wrong_labels(leaf_probs, counts * scale[:, None]).T      # wrong labels, scaled: [c, t] = N̂(c → t)


def unit_sizes(counts, unlabeled):
    """(K,) the items of each unit: its labels plus its unlabeled items (what
    :func:`reverse_confusion` scales by)."""
    return jnp.sum(jnp.asarray(counts, dtype=jnp.float64), axis=1) + jnp.asarray(unlabeled, dtype=jnp.float64)


def prediction_rate_rows(leaf_probs, rtol: float = 1e-6) -> np.ndarray:
    """(C,) bool: top class t's units all split their other classes in the same proportions --
    what a pool of pred + confidence gives (``scores.prior_of_classes`` spreads every item's rest
    as often as the classifier predicts the other classes), as against class probabilities, whose
    split varies from unit to unit.  A top class no unit has counts as such a row."""
    p = np.asarray(leaf_probs, np.float64)
    c = p.shape[1]
    top = top_classes(p)
    out = np.ones(c, bool)
    for t in range(c):
        rows = np.delete(p[top == t], t, axis=1)
        if rows.shape[0] > 1:
            rows = rows / np.maximum(rows.sum(1, keepdims=True), 1e-300)
            out[t] = bool(np.all(np.abs(rows - rows[0]) <= rtol * np.maximum(rows[0], 1e-12) + 1e-12))
    return out


def error_base(leaf_probs, counts=None, unit_size=None, share_weight: float = 0.5):
    """(C, C) α_t of the error split per top class t (row t, zero on the diagonal; C − 1
    pseudo-counts per row): w × the classifier's shares (:func:`error_prior`) + (1 − w) × the
    labels' reverse confusion normalised over the row (:func:`reverse_confusion`), w =
    ``share_weight`` (one point of :data:`SHARE_WEIGHTS`) in the rows whose shares are the prediction rates
    (:func:`prediction_rate_rows`) and 1 where class probabilities set them (they say which
    classes a class is confused with; the estimate replaces only what pred + confidence cannot
    say).  Without labels and unit sizes, the shares alone; in a row the labels estimate no reverse
    confusion for, the even split over the other classes stands in for it (stop 64: not the shares
    again, which made w moot there)."""
    p = np.asarray(leaf_probs, np.float64)
    if counts is None or unit_size is None:
        return jnp.asarray(error_prior(p, top_classes(p)))
    return _mixed_base(_base_parts(p, counts, unit_size), float(share_weight))


def _base_parts(p, counts, unit_size):
    """What :func:`error_base` mixes, computed once for every w: (α_0 the shares' pseudo-counts,
    the shares, the reverse confusion's shares (even over the other classes in a row nothing is
    estimated for), (C, 1) whether the row's shares are prediction rates)."""
    c = p.shape[1]
    alpha0 = jnp.asarray(error_prior(p, top_classes(p)))
    share = alpha0 / (c - 1)
    rev = reverse_confusion(p, counts, unit_size)
    tot = rev.sum(1, keepdims=True)
    even = jnp.where(alpha0 > 0, 1.0 / (c - 1), 0.0)
    rev_share = jnp.where(tot > 0, rev / jnp.maximum(tot, 1e-300), even)
    return alpha0, share, rev_share, jnp.asarray(prediction_rate_rows(p))[:, None]


def _mixed_base(parts, w):
    alpha0, share, rev_share, rate_rows = parts
    w = jnp.where(rate_rows, w, 1.0)
    base = (alpha0.shape[-1] - 1) * (w * share + (1.0 - w) * rev_share)
    return jnp.where(alpha0 > 0, jnp.maximum(base, 1e-12), 0.0)


def error_posterior(leaf_probs, counts, unit_size=None):
    """The other classes' split per top class given the labels, on the grid of triples (w, m, η) =
    :data:`SHARE_WEIGHTS` × :data:`SHARE_MASSES` × :data:`SPREAD_GRID` (w major, then m, G = W × M × E
    points): ((G, C, C) m α_t(w) + η + the wrong labels of top class t, zero on the diagonal; (G,) log
    posterior weights of the triples, exact: the wrong labels' Dirichlet-multinomial likelihood row by
    row under a uniform prior).  α_t(w) is :func:`error_base` (the shares alone without ``unit_size``,
    every w alike), vmapped over w (one traced program, not one per w).  Which point a draw took:
    :func:`grid_point` (:func:`grid_pair` its (w, η))."""
    p = np.asarray(leaf_probs, np.float64)
    wrong = wrong_labels(p, counts)
    ws = jnp.asarray(SHARE_WEIGHTS, dtype=jnp.float64)
    if unit_size is None:
        bases = jnp.broadcast_to(jnp.asarray(error_prior(p, top_classes(p))), (ws.shape[0],) + (p.shape[1],) * 2)
    else:
        parts = _base_parts(p, counts, unit_size)
        bases = jax.vmap(lambda w: _mixed_base(parts, w))(ws)                       # (W, C, C)
    masses = jnp.asarray(SHARE_MASSES, dtype=jnp.float64)
    bases = (bases[:, None] * masses[None, :, None, None]).reshape((-1,) + bases.shape[1:])   # (W·M, C, C)
    a = jax.vmap(spread_alphas)(bases)                                              # (W·M, E, C, C)
    log_lik = jax.vmap(lambda b: spread_log_likelihood(b, wrong))(bases)            # (W·M, E)
    a = a.reshape((-1,) + a.shape[2:])
    return jnp.where(a > 0, a + wrong[None], 0.0), jax.nn.log_softmax(log_lik.reshape(-1))


def grid_point(g):
    """(w, m, η) of the points ``g`` of :func:`error_posterior`'s grid."""
    g = jnp.asarray(g)
    e, n_m = len(SPREAD_GRID), len(SHARE_MASSES)
    return (jnp.asarray(SHARE_WEIGHTS, dtype=jnp.float64)[g // (e * n_m)],
            jnp.asarray(SHARE_MASSES, dtype=jnp.float64)[(g // e) % n_m],
            jnp.asarray(SPREAD_GRID, dtype=jnp.float64)[g % e])


def grid_pair(g):
    """(w, η) of the points ``g`` of :func:`error_posterior`'s grid."""
    w, _, eta = grid_point(g)
    return w, eta


def classes_pi(key, leaf_probs, counts, rho, unit_size=None):
    """Draws of π(c|u) (n, K, C), of the other classes' split per top class φ (n, C, C), of its
    spread η (n,), of the shares' weight w in its prior (n,) and of the prior's mass m (n,) given
    draws of the top split ρ (n, K) (from the binary calibrated model on :func:`top_split`):
    (w, m, η) from their posterior on the grid, then φ_t from its exact conditional Dirichlet(m α_t(w)
    + η + the wrong labels of top class t); ``unit_size`` (K,) labeled + unlabeled items per unit, for
    α_t's reverse confusion (:func:`error_base`)."""
    p = np.asarray(leaf_probs, np.float64)
    top = top_classes(p)
    on_top = jnp.asarray(np.eye(p.shape[1])[top])
    alpha_post, log_w = error_posterior(p, counts, unit_size)
    k_eta, k_phi = jax.random.split(key)
    g = jax.random.categorical(k_eta, log_w, shape=(rho.shape[0],))
    phi = _gamma_split(k_phi, alpha_post[g])
    w, m, eta = grid_point(g)
    return rho[..., None] * on_top + (1.0 - rho)[..., None] * phi[:, top, :], phi, eta, w, m


def _gamma_split(key, alpha):
    """Dirichlet draws of the rows of ``alpha`` (…, C) (zeros allowed: those classes get 0)."""
    g = jax.random.gamma(key, jnp.where(alpha > 0, alpha, 1.0))
    g = jnp.where(alpha > 0, g, 0.0)
    return g / jnp.maximum(g.sum(-1, keepdims=True), 1e-300)


def _mean_split(alphas, log_w):
    """E[φ] (C, C) over the grid's weights of Dirichlet parameters (G, C, C)."""
    means = alphas / jnp.maximum(jnp.sum(alphas, axis=-1, keepdims=True), 1e-300)
    return jnp.einsum("g,gij->ij", jnp.exp(log_w), means)


def calibrated_classes_model(leaf_probs, n_proposals: int = 1024, fit_iters: int = 25, bands: int = BANDS,
                             band_scale=None):
    """The model behind the ``OracleModel`` interface for C ≥ 2 classes (see the module
    docstring); ``leaf_probs`` (K, C) the classifier's mean class probabilities per unit,
    ``band_scale`` the band walk's scale (default :data:`TOP_BAND_SCALE`, fixed; a sequence: learned
    over it), the rest as :func:`bayes_eval.models.calibrated.calibrated_model`."""
    from .oracle import OracleModel

    p = np.asarray(leaf_probs, np.float64)
    c = p.shape[1]
    top = top_classes(p)
    inner = calibrated_model(top_split(p), n_proposals=n_proposals, fit_iters=fit_iters, bands=bands,
                             band_scale=TOP_BAND_SCALE if band_scale is None else band_scale, groups=top if CLASS_OFFSETS else None, n_groups=c,
                             prior=POSTERIOR_PRIOR)
    on_top = jnp.asarray(np.eye(c)[top])                     # (K, C)
    top_j = jnp.asarray(top, dtype=jnp.int32)
    alpha0 = jnp.asarray(error_prior(p, top))                  # (C, C)

    def split(counts):
        """(K, 2): labels off and on each unit's top class."""
        return top_split(p, counts)[1]

    def combine(rho, phi_rows):
        """π(c|u) from the top split ρ (…, K) and the other classes' split per unit (…, K, C)."""
        return rho[..., None] * on_top + (1.0 - rho)[..., None] * phi_rows

    def init_state():
        return ClassesState(inner.init_state(), jnp.zeros(p.shape[0], dtype=jnp.float64))

    def fit(state, counts, unlabeled):
        return ClassesState(inner.fit(state.inner, split(counts), unlabeled), unit_sizes(counts, unlabeled))

    def predictive(state):
        grid_prior = jnp.full(len(SPREAD_GRID), -np.log(len(SPREAD_GRID)))
        phi = _mean_split(spread_alphas(alpha0), grid_prior)
        return combine(inner.predictive(state.inner)[:, 1], phi[top_j])

    def posterior_predictive(state, counts):
        phi = _mean_split(*error_posterior(p, counts, state.unit_size))
        return combine(inner.posterior_predictive(state.inner, split(counts))[:, 1], phi[top_j])

    def sample(key, counts, unlabeled, n_draws, state=None):
        k1, k2, k3 = jax.random.split(key, 3)
        s = inner.sample(k1, split(counts), unlabeled, n_draws, state=None if state is None else state.inner)
        pi, phi, eta, w, mass = classes_pi(k2, p, counts, s["pi"][..., 1], unit_sizes(counts, unlabeled))
        m_top = s["unlabeled_counts"][..., 1]                  # (n, K) unlabeled on the top class
        # the rest over the classes by the unit's split: a multinomial draw
        m = multinomial_counts(k3, unlabeled[None, :] - m_top, phi[:, top_j, :]) + m_top[..., None] * on_top
        return {"pi": pi, "unlabeled_counts": m, "a": s["a"], "b": s["b"], "kappa": s["kappa"],
                "band_offset": s["band_offset"], "class_offset": s["group_offset"], "error_split": phi, "error_spread": eta,
                "error_share_weight": w, "error_mass": mass,
                "importance_ess": s["importance_ess"], **({"class_offset_scale": s["group_scale"]} if "group_scale" in s else {}),
                **({"band_offset_scale": s["band_scale"]} if "band_scale" in s else {})}

    return OracleModel("calibrated-classes", init_state, fit, predictive, sample, posterior_predictive)
