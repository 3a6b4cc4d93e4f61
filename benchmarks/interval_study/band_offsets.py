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
(half the bands among the predicted-negative units, half among the predicted-positive ones).  Per capture, variant and
checkpoint: coverage, mean width, the posterior mean's bias, the median importance ESS.
Writes ``benchmarks/results/band_offsets.md`` (``--out``; ``--append`` adds rows).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys

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


def parse_variant(name):
    if name == "library":
        return 0, 0.0, 0.0, False
    m = re.fullmatch(r"m(\d+)t([0-9.]+)(?:a([0-9.]+))?(s?)", name)
    if not m:
        raise SystemExit(f"unknown variant {name!r}: 'library' or 'mMtT' or 'mMtTaA' (a trailing 's': split)")
    return int(m.group(1)), float(m.group(2)), float(m.group(3) or m.group(2)), bool(m.group(4))


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


def study(pool_path, capture, draws, proposals, variants, max_runs=None):
    cap = load_capture(pool_path, capture)
    d, units, z, g, t = cap.data, cap.units, cap.z, cap.g, cap.truth
    uc, n_units = units.cells, units.n_units
    sizes = np.asarray(jax.ops.segment_sum(uc.size, uc.stratum, num_segments=n_units))
    runs = d["labeled"].shape[0] if max_runs is None else min(max_runs, d["labeled"].shape[0])
    rows = []
    for name in variants:
        m, tau, anchor, split = parse_variant(name)
        if split:   # a unit is predicted positive where its loss for the negative class is nonzero (F1)
            pp = np.asarray(jax.ops.segment_max(jnp.abs(uc.loss[:, 0, :]).max(-1), uc.stratum, num_segments=n_units)) > 0
            band = split_bands_of(z, pp, m)
        else:
            band = bands_of(z, sizes, m) if m else jnp.zeros(n_units, int)
        curve = curve_of(z, band, m, tau, anchor)
        init = C.CalibratedState(mode=C._prior_mode(m), cov=C._prior_cov(curve.precision))

        @jax.jit
        def interval(key, lab, curve=curve, init=init):
            counts = leaf_counts(uc, lab, n_units)[0]
            st = C.fit_mode(curve, counts, init=init, n_iter=40)
            k1, k2, k3 = jax.random.split(key, 3)
            th, ess = C.sample_params(k1, curve, counts, st, draws, n_proposals=proposals)
            mu = jnp.clip(jax.nn.sigmoid(jax.vmap(C.curve_eta, in_axes=(0, None))(th, curve)), 1e-12, 1 - 1e-12)
            kappa = jnp.exp(th[:, 2:3])
            pi1 = jax.random.beta(k2, kappa * mu + counts[None, :, 1], kappa * (1 - mu) + counts[None, :, 0])
            pi = jnp.stack([1 - pi1, pi1], axis=-1)
            post = pool_posterior_from_pi(k3, g, uc, lab, pi, n_units)
            lo, hi, _ = resolved_interval(post, lab, uc)
            return jnp.stack([post.value[:, 0].mean(), lo[0], hi[0], ess, jnp.median(th[:, 2])])

        for c, n in enumerate(d["checkpoints"]):
            r = np.array([np.asarray(interval(jax.random.PRNGKey(i), jnp.asarray(d["labeled"][i, c])))
                          for i in range(runs)])
            cov = float(np.mean(covers(r[:, 1], r[:, 2], t)))
            rows.append((name, int(n), cov, float(np.mean(r[:, 2] - r[:, 1])), float(r[:, 0].mean() - t),
                         float(np.median(r[:, 3])), float(np.median(r[:, 4]))))
            print(os.path.basename(capture), rows[-1], flush=True)
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
        parse_variant(v)
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
