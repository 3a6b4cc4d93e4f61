"""Is the item-level model's Laplace posterior the exact one?  ``item_curve_study.py`` gives the
10% pool's captured poisson-adaptive runs the generator's own model with a Laplace posterior of
(α, β); if that approximation were too narrow where the curve extrapolates into the low scores,
the true model's shortfall (``item_curve.md``) would be the approximation's.  Here the same labels
(the last checkpoint of each run) get both the Laplace posterior and the exact one by importance
resampling: 20,000 proposals from a t(4) at the Laplace mode with 1.5 × its covariance, weighted
by the exact log posterior (the library's prior), 400 draws resampled; F1's finite-pool draws and
highest-density interval as in ``item_curve_study.py``.  Prints both coverages and widths and the
importance ESS.

    python benchmarks/interval_study/item_curve_exact.py /tmp/realizations/p0.1s3.parquet \
        /tmp/cap/p0.1s3_pa.npz 60

(about 5 s per run on one core; the captures as in ``item_curve_study.py``).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import item_curve_study as S  # noqa: E402  (beside this file)
from capture_labels import load_capture  # noqa: E402


def log_posterior(ab, x, y):
    """(M,) exact log posterior of each (α, β) row of ``ab`` given labeled scores ``x`` and labels ``y``."""
    import jax.numpy as jnp
    eta = ab[:, :1] + ab[:, 1:] * x[None, :]
    return (y[None, :] * eta - jnp.logaddexp(0.0, eta)).sum(1) - 0.5 * (((ab - S.PRIOR_MEAN) / S.PRIOR_SD) ** 2).sum(1)


def exact_draws(key, th, cov, x, y, n_proposals, n_draws, nu=4.0):
    """(n_draws, 2) draws of (α, β) from the exact posterior by importance resampling (a t(ν)
    proposal at the Laplace mode with 1.5 × its covariance), and the importance ESS."""
    import jax
    import jax.numpy as jnp
    k1, k2, k3 = jax.random.split(key, 3)
    chol = jnp.linalg.cholesky(1.5 * cov)
    z = jax.random.normal(k1, (n_proposals, 2)) / jnp.sqrt(jax.random.gamma(k2, nu / 2, (n_proposals,)) / (nu / 2))[:, None]
    ab = th + z @ chol.T
    log_q = -0.5 * (nu + 2) * jnp.log1p((z ** 2).sum(1) / nu)
    lw = log_posterior(ab, x, y) - log_q
    w = jnp.exp(lw - lw.max())
    w = w / w.sum()
    return ab[jax.random.choice(k3, n_proposals, (n_draws,), p=w)], float(1.0 / (w ** 2).sum())


def main(argv=None):
    import jax
    import jax.numpy as jnp
    from bayes_eval.posterior import highest_density

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pool")
    ap.add_argument("capture")
    ap.add_argument("runs", type=int)
    ap.add_argument("--proposals", type=int, default=20_000)
    ap.add_argument("--draws", type=int, default=400)
    a = ap.parse_args(argv)
    cap = load_capture(a.pool, a.capture)
    truth, lab = cap.truth, cap.data["labeled"]
    y = np.asarray(cap.pool.labels).astype(np.int64)
    prob = np.clip(np.asarray(cap.pool.probs[:, 0, 1], np.float64), 1e-12, 1 - 1e-12)
    s = np.log(prob) - np.log1p(-prob)
    pred = np.asarray(cap.pool.preds[:, 0]).astype(bool)
    rng, key = np.random.default_rng(0), jax.random.PRNGKey(0)
    iv = {"laplace": [], "exact": []}
    ess = []
    for r in range(min(a.runs, lab.shape[0])):
        m = S.labeled_items(cap.item_cell, y, lab[r, -1], rng)      # the last checkpoint's labels
        x, yy = jnp.asarray(s[m]), jnp.asarray(y[m], jnp.float64)
        th, cov = S.laplace(x, yy)
        known = jnp.array([np.sum(m & pred & (y == 1)), np.sum(m & pred & (y == 0)),
                           np.sum(m & ~pred & (y == 1))], jnp.float64)
        s_pp, s_pn = jnp.asarray(s[~m & pred]), jnp.asarray(s[~m & ~pred])
        key, k1, k2, k3 = jax.random.split(key, 4)
        f_lap = S.f1_draws(k1, th, cov, s_pp, s_pn, known, a.draws)
        ab, e = exact_draws(k2, th, cov, x, yy, a.proposals, a.draws)
        ess.append(e)
        for name, f in (("laplace", f_lap), ("exact", S.f1_of_curves(ab, s_pp, s_pn, known, *jax.random.split(k3)))):
            lo, hi = highest_density(f[:, None])
            iv[name].append((float(lo[0]), float(hi[0])))
    print(f"{a.capture}: {len(ess)} runs at {int(cap.data['checkpoints'][-1])} labels, truth {truth:.4f}")
    for name, rows in iv.items():
        b = np.array(rows)
        print(f"{name}: coverage {np.mean((b[:, 0] <= truth) & (truth <= b[:, 1])):.3f}, "
              f"mean width {np.mean(b[:, 1] - b[:, 0]):.4f}")
    print(f"importance ESS of {a.proposals} proposals: min {min(ess):.0f}, median {np.median(ess):.0f}")


if __name__ == "__main__":
    main()
