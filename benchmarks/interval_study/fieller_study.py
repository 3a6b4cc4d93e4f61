"""Coverage and width of ratio-measure intervals from a variance_study.py ``--npz`` record.

Intervals for G = R₁ / R₂ (F1, precision, recall, F-beta) at the checkpoints:

* ``delta``    -- the delta method around Ĝ with the own-weight martingale covariance;
* ``fieller``  -- the test-inversion (Fieller 1954) set {G : (R̂₁ − G R̂₂)² ≤ z² V(G)},
  V(G) = [1, −G] S [1, −G]ᵀ, S = Σ_j w_j² ℓ_j ℓ_jᵀ / n² (uncentered: under H₀ the
  increments w_j (ℓ_j1 − G ℓ_j2) have conditional mean 0, so S is their martingale
  quadratic variation, 001 §3.3.2 / Thm. 1);
* ``fieller-model`` -- the same with S from the calibrated model's predictable second
  moment (the unlabeled items' classes from the model fitted before each stage).

    python benchmarks/interval_study/fieller_study.py /tmp/istudy/rec_p0.1.npz
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

Z = 1.959963984540054


def fieller(r, S, z=Z, lo=0.0, hi=1.0):
    """Vectorized Fieller interval for r[..., 0] / r[..., 1] with second-moment S[..., 2, 2]."""
    r1, r2 = r[..., 0], r[..., 1]
    a = r2**2 - z**2 * S[..., 1, 1]
    b = -2.0 * (r1 * r2 - z**2 * S[..., 0, 1])
    c = r1**2 - z**2 * S[..., 0, 0]
    disc = np.clip(b**2 - 4 * a * c, 0.0, None)
    sq = np.sqrt(disc)
    with np.errstate(divide="ignore", invalid="ignore"):
        x1 = (-b - sq) / (2 * a)
        x2 = (-b + sq) / (2 * a)
    bounded = a > 0
    L = np.where(bounded, np.minimum(x1, x2), lo)
    U = np.where(bounded, np.maximum(x1, x2), hi)
    return np.clip(L, lo, hi), np.clip(U, lo, hi)


def delta(value, var, z=Z, lo=0.0, hi=1.0):
    sd = np.sqrt(np.clip(var, 0, None))
    return np.clip(value - z * sd, lo, hi), np.clip(value + z * sd, lo, hi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("npz")
    ap.add_argument("--checkpoints", default="500,1000,2000")
    args = ap.parse_args()
    d = np.load(args.npz)
    truth = float(d["truth"][0])
    cum = d["cum"]
    print(f"# {args.npz}: truth {truth:.4f}")
    print("| labels | RMSE | delta cov (width) | fieller cov (width) | fieller-model cov (width) |")
    print("|---|---|---|---|---|")
    for ck in [int(c) for c in args.checkpoints.split(",")]:
        s = int(np.searchsorted(cum, ck))
        val = d["value"][:, s, 0]
        ok = np.isfinite(val)
        rmse = np.sqrt(np.mean((val[ok] - truth) ** 2))
        cells = [f"{ck}", f"{rmse:.4f}"]
        for name, (L, U) in (("delta", delta(val, d["own"][:, s, 0])),
                             ("fieller", fieller(d["risk"][:, s], d["S_own"][:, s])),
                             ("fieller-model", fieller(d["risk"][:, s], d["S_mod"][:, s]))):
            cov = np.mean((L[ok] <= truth) & (truth <= U[ok]))
            cells.append(f"{cov:.3f} ({np.mean(U[ok] - L[ok]):.3f})")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
