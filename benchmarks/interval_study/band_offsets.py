"""A calibration curve that may depart from the logistic in *bands* of the score, on captured runs
(issue 15, item 1: the route ``misspecified.md`` points at).

Until stop 51 the library's calibrated model (``models/calibrated.py``) put each unit's class rate on a
two-parameter logistic curve of the score, μ_u = sigmoid(a + b z_u), and let each unit stray
from it independently (π_u ~ Beta(κ μ_u, κ (1 − μ_u))).  Where the pool's positive rate is no
logistic curve of the score (the staircase and dip pools of ``misspecified_pool.py``) the
fitted curve is off by whole bands; the lightly-labeled units are pulled back to it one by one,
their errors all point one way and add up while their noise averages out: a narrow posterior in
the wrong place (coverage 0.46–0.89 with AIS).

This model lets the curve itself depart, by one offset per band of the score:

    μ_u = sigmoid(a + b z_u + d_{band(u)}),   band = the u's quantile band of z among the units,
    d ~ N(0, Q⁻¹),  Q = I/A² + DᵀD/τ²   (a Gaussian random walk over neighbouring bands, D the
                                          first-difference matrix, each offset also held to 0
                                          with scale A, τ unless given)

so units of one band move together (their departures no longer average out), and a band's
labels — not the curve through the other bands — set its level.  (a, b, log κ, d) are sampled
by the library's Laplace-t importance resampling (``calibrated.fit_mode`` / ``sample_params``
on the library's ``CalibrationCurve``, closed-form derivatives), π_u from its exact Beta conditional, the finite pool as the
library's (``posterior.pool_posterior_from_pi``), the interval the library's
(``posterior.resolved_interval``: highest-density with the one-item floor)::

    python benchmarks/interval_study/band_offsets.py POOL CAPTURE.npz [POOL CAPTURE.npz ...] \\
        --variants library,m6t1,m6t2

Variants: ``library`` (no bands: the two-parameter model the library used until stop 51, through
the same code, as the control; the library's model since is ``m6t1``, ``models/calibrated.py``
``BANDS`` / ``BAND_SCALE``) and
``mMtT`` (M bands, random-walk scale τ = T; ``m6t0.5`` works), ``mMtTaA`` (anchor scale A); a trailing ``s`` cuts the bands at the decision threshold
(half the bands among the predicted-negative units, half among the predicted-positive ones);
``kMtTeE`` (each band its own log κ = log κ + e_j, e_j ~ N(0, E²)) and ``tMnNUsSaA`` (Student-t(NU)
random-walk steps of scale S, anchor A), both through :func:`variant_density` (autodiff
derivatives; stop 52: measured, not adopted -- ``band_offsets.md``); ``gMtS1-S2-..`` (stop 59: the library's M
bands with the random walk's scale learned over the grid S1, S2, .., uniform: ``calibrated.offset_grid``,
``fit_mode_grid``, ``sample_params_grid``; the runs' median posterior-mean scale is printed); ``bma:X+Y`` mixes two
variants' posteriors draw by draw by their evidence (an importance-sampled marginal likelihood).  Per capture, variant and
checkpoint: coverage, mean width, the posterior mean's bias, the median importance ESS.
Writes ``benchmarks/results/band_offsets.md`` (``--out``; ``--append`` adds rows).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from audit_study import MARK, write_table  # noqa: E402  (beside this file)
from bayes_eval.cells import leaf_counts  # noqa: E402
from bayes_eval.models import calibrated as C  # noqa: E402
from bayes_eval.posterior import pool_posterior_from_pi, resolved_interval  # noqa: E402
from bayes_eval.results import covers  # noqa: E402
from capture_labels import load_capture  # noqa: E402

OUT = os.path.join(ROOT, "benchmarks", "results", "band_offsets.md")


class Variant(NamedTuple):
    bands: int        # 0: the two-parameter curve
    tau: float        # random-walk scale (Student-t increments: their scale)
    anchor: float     # each offset held to 0 at this scale
    split: bool       # bands cut at the decision threshold
    kappa_sd: float   # > 0: each band its own log κ offset e_j ~ N(0, kappa_sd²) (``kMtTeE``)
    t_df: float       # > 0: Student-t(t_df) random-walk increments instead of Gaussian (``tMnNsSaA``)
    scales: tuple = ()  # the random walk's scale learned over this grid (``gMtS1-S2-...``)


def parse_variant(name):
    if name == "library":
        return Variant(0, 0.0, 0.0, False, 0.0, 0.0)
    m = re.fullmatch(r"m(\d+)t([0-9.]+)(?:a([0-9.]+))?(s?)", name)
    if m:
        return Variant(int(m.group(1)), float(m.group(2)), float(m.group(3) or m.group(2)), bool(m.group(4)), 0.0, 0.0)
    m = re.fullmatch(r"k(\d+)t([0-9.]+)e([0-9.]+)", name)
    if m:
        return Variant(int(m.group(1)), float(m.group(2)), float(m.group(2)), False, float(m.group(3)), 0.0)
    m = re.fullmatch(r"g(\d+)t([0-9.]+(?:-[0-9.]+)+)", name)
    if m:
        grid = tuple(float(x) for x in m.group(2).split("-"))
        return Variant(int(m.group(1)), grid[0], grid[0], False, 0.0, 0.0, grid)
    m = re.fullmatch(r"t(\d+)n([0-9.]+)s([0-9.]+)a([0-9.]+)", name)
    if m:
        return Variant(int(m.group(1)), float(m.group(3)), float(m.group(4)), False, 0.0, float(m.group(2)))
    raise SystemExit(f"unknown variant {name!r}: 'library', 'mMtT', 'mMtTaA' (a trailing 's': split), 'kMtTeE' "
                     f"(per-band κ), 'tMnNUsSaA' (Student-t increments) or 'gMtS1-S2-..' (the scale learned over a grid)")


def variant_density(v: Variant, band):
    """``(log_post, kappa_of)`` for :func:`bayes_eval.models.calibrated.fit_mode` /
    ``sample_params`` where the variant is not the library's Gaussian random walk (else
    ``(None, None)``: the library's density and closed-form derivatives).  ``kappa_of(theta)``:
    each unit's κ.

    * per-band κ (``kMtTeE``): theta = (a, b, log κ, d₁..d_M, e₁..e_M), log κ_u = log κ + e_band(u),
      e ~ N(0, E²): a band whose units stray from its curve (a step inside it) no longer lowers
      κ — and with it what the labels of every other band say about that band's level;
    * Student-t increments (``tMnNUsSaA``): d_j − d_{j−1} ~ t_N(0, S²), d_j ~ N(0, A²): small steps
      shrunk, a jump allowed where the labels show one."""
    band = jnp.asarray(band)
    m = v.bands
    if v.kappa_sd > 0:
        D = np.diff(np.eye(m), axis=0)
        Q = jnp.asarray(np.eye(m) / v.anchor**2 + D.T @ D / v.tau**2)

        def log_post(th, curve, counts):
            d, e = th[3:3 + m], th[3 + m:]
            mu = jnp.clip(jax.nn.sigmoid(th[0] + th[1] * curve.z + d[band]), 1e-12, 1 - 1e-12)
            kappa = jnp.exp(th[2] + e[band])
            n1, n0 = counts[:, 1], counts[:, 0]
            ll = jnp.sum(jnp.where(n1 + n0 > 0, C._bb_loglik(kappa, mu, n1, n0), 0.0))
            lp = sum(-0.5 * ((x - c) / sd) ** 2 for x, (c, sd) in zip(th[:3], C.PRIOR.values()))
            return ll + lp - 0.5 * d @ Q @ d - 0.5 * jnp.sum(e**2) / v.kappa_sd**2

        return log_post, lambda th: jnp.exp(th[..., 2:3] + th[..., 3 + m:][..., band])
    if v.t_df > 0:
        def log_post(th, curve, counts):   # the curve's own precision is zero: no Gaussian prior
            d = th[3:]
            inc = jnp.diff(d)
            return (C.log_posterior(th, curve, counts) - 0.5 * jnp.sum(d**2) / v.anchor**2
                    - 0.5 * (v.t_df + 1) * jnp.sum(jnp.log1p(inc**2 / (v.t_df * v.tau**2))))

        return log_post, None
    return None, None


def bands_of(z, sizes, m):
    """(U,) band of each unit: m quantile bands of z over the units that hold items."""
    zz = np.asarray(z)[np.asarray(sizes) > 0]
    cuts = np.quantile(zz, np.linspace(0, 1, m + 1)[1:-1])
    return jnp.asarray(np.searchsorted(cuts, np.asarray(z), side="right"))


def split_bands_of(z, predicted_positive, m):
    """(U,) band of each unit with the bands cut at the decision threshold: m / 2 quantile bands
    of z among the predicted-negative units, then m / 2 among the predicted-positive ones (the
    random walk runs on across the threshold)."""
    z, pp = np.asarray(z), np.asarray(predicted_positive, bool)
    half = m // 2
    band = np.zeros(z.shape, int)
    for g, (sel, k) in enumerate(((~pp, half), (pp, m - half))):
        if sel.any():
            cuts = np.quantile(z[sel], np.linspace(0, 1, k + 1)[1:-1])
            band[sel] = np.searchsorted(cuts, z[sel], side="right") + g * half
    return jnp.asarray(band)


def curve_of(z, band, m, tau, anchor):
    """The library's :class:`~bayes_eval.models.calibrated.CalibrationCurve` with this variant's
    bands and prior precision Q = I/A² + DᵀD/τ² (the library's is A = τ); m = 0: no bands.  The
    library's density, closed-form derivatives and sampler then serve every variant."""
    if m == 0:
        return C.make_curve(z, 0)
    D = np.diff(np.eye(m), axis=0)
    return C.CalibrationCurve(z, jnp.asarray(band, jnp.int32), jnp.asarray(np.eye(m) / anchor**2 + D.T @ D / tau**2))


def _log_evidence(key, log_post, state, n, df=5.0):
    """log p(labels | model) by importance sampling from the library's Laplace-t proposal
    (:func:`bayes_eval.models.calibrated._student_t`, its log density completed with the
    Student-t's normalizing constant; ``log_post`` normalized in the parameters; the Beta-binomial
    coefficients, the same for every model, left out)."""
    k = state.mode.shape[0]
    cov = 1.5 * state.cov
    x, logq = C._student_t(key, state.mode, cov, n, df)
    logq = logq + (jax.scipy.special.gammaln((df + k) / 2) - jax.scipy.special.gammaln(df / 2)
                   - 0.5 * k * jnp.log(df * jnp.pi) - 0.5 * jnp.linalg.slogdet(cov + 1e-9 * jnp.eye(k))[1])
    logw = jnp.where(jnp.isfinite(x).all(1), jax.vmap(log_post)(x) - logq, -jnp.inf)
    return jax.scipy.special.logsumexp(logw) - jnp.log(n)


def pi_sampler(name, z, sizes, uc, n_units, draws, proposals):
    """``sample(key, counts) -> (π draws (draws, units, 2), importance ESS, median log κ, log evidence)``
    of one variant (:func:`parse_variant`)."""
    v = parse_variant(name)
    m = v.bands
    if v.split:   # a unit is predicted positive where its loss for the negative class is nonzero (F1)
        pp = np.asarray(jax.ops.segment_max(jnp.abs(uc.loss[:, 0, :]).max(-1), uc.stratum, num_segments=n_units)) > 0
        band = split_bands_of(z, pp, m)
    else:
        band = bands_of(z, sizes, m) if m else jnp.zeros(n_units, int)
    log_post, kappa_of = variant_density(v, band)
    # the Student-t variant's curve carries no Gaussian precision (its prior is in log_post)
    gauss = curve_of(z, band, m, v.tau, v.anchor)
    curve = gauss if v.t_df == 0 else C.CalibrationCurve(z, jnp.asarray(band, jnp.int32), jnp.zeros((m, m)))
    init = C.CalibratedState(mode=C._prior_mode(m), cov=C._prior_cov(gauss.precision))
    if v.kappa_sd > 0:
        init = C.CalibratedState(mode=jnp.concatenate([init.mode, jnp.zeros(m)]),
                                 cov=jax.scipy.linalg.block_diag(init.cov, v.kappa_sd**2 * jnp.eye(m)))
    kappa_of = kappa_of or (lambda th: jnp.exp(th[..., 2:3]))
    # the priors' normalizing constants (log_posterior leaves them out), for the evidence
    norm = -sum(math.log(sd) for _, sd in C.PRIOR.values()) - 1.5 * math.log(2 * math.pi)
    if m and v.t_df == 0:
        norm += 0.5 * float(np.linalg.slogdet(np.asarray(gauss.precision))[1]) - 0.5 * m * math.log(2 * math.pi)
    if v.kappa_sd > 0:
        norm += -m * math.log(v.kappa_sd) - 0.5 * m * math.log(2 * math.pi)
    dens = log_post or C.log_posterior
    if v.scales:   # the library's random walk with its scale learned over the grid (models/calibrated.py)
        grid = C.offset_grid(curve, band_scales=v.scales)

        def sample_grid(key, counts):
            st = C.fit_mode_grid(curve, grid, counts, n_iter=40)
            k1, k2, _ = jax.random.split(key, 3)
            th, point, ess = C.sample_params_grid(k1, curve, grid, counts, st, draws, proposals)
            mu = jnp.clip(jax.nn.sigmoid(jax.vmap(C.curve_eta, in_axes=(0, None))(th, curve)), 1e-12, 1 - 1e-12)
            kappa = jnp.exp(th[:, 2:3])
            pi1 = jax.random.beta(k2, kappa * mu + counts[None, :, 1], kappa * (1 - mu) + counts[None, :, 0])
            # the fourth slot (the evidence, for bma:) carries the draws' mean scale instead
            return jnp.stack([1 - pi1, pi1], axis=-1), ess, jnp.median(th[:, 2]), jnp.mean(grid.band_scale[point])

        return sample_grid

    def sample(key, counts):
        st = C.fit_mode(curve, counts, init=init, n_iter=40, log_post=log_post)
        k1, k2, _ = jax.random.split(key, 3)   # (the third: the pool's completion, in study())
        k4 = jax.random.fold_in(key, 1)
        th, ess = C.sample_params(k1, curve, counts, st, draws, n_proposals=proposals, log_post=log_post)
        mu = jnp.clip(jax.nn.sigmoid(jax.vmap(C.curve_eta, in_axes=(0, None))(th[:, :3 + m], curve)), 1e-12, 1 - 1e-12)
        kappa = kappa_of(th)
        pi1 = jax.random.beta(k2, kappa * mu + counts[None, :, 1], kappa * (1 - mu) + counts[None, :, 0])
        logz = norm + _log_evidence(k4, lambda t: dens(t, curve, counts), st, proposals)
        return jnp.stack([1 - pi1, pi1], axis=-1), ess, jnp.median(th[:, 2]), logz

    return sample


def study(pool_path, capture, draws, proposals, variants, max_runs=None):
    cap = load_capture(pool_path, capture)
    d, units, z, g, t = cap.data, cap.units, cap.z, cap.g, cap.truth
    uc, n_units = units.cells, units.n_units
    sizes = np.asarray(jax.ops.segment_sum(uc.size, uc.stratum, num_segments=n_units))
    runs = d["labeled"].shape[0] if max_runs is None else min(max_runs, d["labeled"].shape[0])
    rows = []
    for name in variants:
        # "bma:X+Y": X's and Y's posteriors mixed by their evidence (equal prior odds), draw by draw
        parts = name[4:].split("+") if name.startswith("bma:") else [name]
        samplers = [pi_sampler(p, z, sizes, uc, n_units, draws, proposals) for p in parts]

        @jax.jit
        def interval(key, lab, samplers=samplers):
            counts = leaf_counts(uc, lab, n_units)[0]
            out = [smp(key if j == 0 else jax.random.fold_in(key, 11), counts) for j, smp in enumerate(samplers)]
            pi, ess, lk, logz = out[0]
            w_first = jnp.ones(())
            if len(out) == 2:
                w_first = jax.nn.sigmoid(out[0][3] - out[1][3])   # posterior probability of the first model
                pick = jax.random.uniform(jax.random.fold_in(key, 12), (draws,)) < w_first
                pi = jnp.where(pick[:, None, None], out[0][0], out[1][0])
                ess = jnp.minimum(out[0][1], out[1][1])
            post = pool_posterior_from_pi(jax.random.split(key, 3)[2], g, uc, lab, pi, n_units)
            lo, hi, _ = resolved_interval(post, lab, uc)
            return jnp.stack([post.value[:, 0].mean(), lo[0], hi[0], ess, lk, w_first, out[0][3]])

        for c, n in enumerate(d["checkpoints"]):
            r = np.array([np.asarray(interval(jax.random.PRNGKey(i), jnp.asarray(d["labeled"][i, c])))
                          for i in range(runs)])
            cov = float(np.mean(covers(r[:, 1], r[:, 2], t)))
            rows.append((name, int(n), cov, float(np.mean(r[:, 2] - r[:, 1])), float(r[:, 0].mean() - t),
                         float(np.median(r[:, 3])), float(np.median(r[:, 4]))))
            extra = f" (mean weight of {parts[0]}: {r[:, 5].mean():.2f})" if len(parts) == 2 else ""
            if parse_variant(parts[0]).scales:
                extra = f" (posterior mean of the scale, median over runs: {np.median(r[:, 6]):.2f})"
            print(os.path.basename(capture), rows[-1], extra, flush=True)
    return t, runs, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="POOL CAPTURE.npz pairs")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--proposals", type=int, default=2048)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--variants", default="library,m6t1")
    ap.add_argument("--runs", type=int, default=None, help="only the first RUNS runs of each capture")
    ap.add_argument("--append", action="store_true", help="add the rows to the table in --out")
    a = ap.parse_args(argv)
    variants = a.variants.split(",")
    for v in variants:
        for part in (v[4:].split("+") if v.startswith("bma:") else [v]):
            parse_variant(part)
    if len(a.pairs) % 2:
        raise SystemExit("give POOL CAPTURE.npz pairs")
    se = math.sqrt(0.95 * 0.05)
    cmd = f"python benchmarks/interval_study/band_offsets.py {' '.join(a.pairs)} --variants {a.variants}"
    lines = ["# A calibration curve with band offsets, on captured runs", "",
             f"Generated by `{cmd}` ({a.draws} posterior draws from {a.proposals} importance proposals; the library's "
             "interval: highest-density with the one-item floor).", "",
             "| capture | runs | variant | labels | coverage | mean width | posterior mean − truth | median importance ESS | median log κ |",
             "|---|---|---|---|---|---|---|---|---|"]
    if a.append:
        with open(a.out, encoding="utf-8") as f:
            old = f.read().split(MARK)[0]
        lines = old.rstrip("\n").split("\n") + ["", f"Added by `{cmd} --append`:", "", lines[-2], lines[-1]]
    for pool_path, capture in zip(a.pairs[::2], a.pairs[1::2]):
        t, runs, rows = study(pool_path, capture, a.draws, a.proposals, variants, a.runs)
        for name, n, cov, wid, bias, ess, lk in rows:
            lines.append(f"| {os.path.basename(capture)} (F1 {t:.4f}) | {runs} | {name} | {n} | {cov:.3f} | {wid:.4f} | "
                         f"{bias:+.4f} | {ess:.0f} | {lk:.1f} |")
        lines.append(f"| | | | | (binomial SE at 0.95: {se / math.sqrt(runs):.3f}) | | | | |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    write_table(a.out, lines)


if __name__ == "__main__":
    main()
