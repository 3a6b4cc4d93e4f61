"""The twins bound, layered and placed where the design looks least (issue 15, item 1).

``interval_twins.md`` showed that no interval procedure can cover ≥ 1 − α on abt-buy *and* on
its twins (the pool with K negatives of the tail made positive) with a mean width on abt-buy
below |ΔF1| · (P(E) − 2α), E the event that the design labels none of the planted items (on E
the two runs see the same answers, so they report the same interval). It planted K items
uniformly below rank 3000 and took one K.  This script sharpens the bound two ways.

*Layered.* Plant the items of a band in one fixed random order and let twin K hold the first K.
The planted sets are nested, so on E_K (none of the first K labeled) the intervals on abt-buy and
on twins 1..K are one interval, which must hold F₀ and F_K with probability ≥ P(E_K) − 2α.  Its
width exceeds t = F₀ − F_K with that probability, and E[width] = ∫ P(width > t) dt gives

    E[width on the pool] ≥ Σ_K (F_{K−1} − F_K) · (P(E_K) − 2α)⁺,

the area under the curve that the single-K bound takes one rectangle of.  P(E_K) is averaged
over the order (a uniformly random K-subset of the band's negatives: the hypergeometric
C(N − L, K) / C(N, K) given the L negatives a run has labeled there, averaged over runs); some
fixed order does at least as well as that average (Jensen, (·)⁺ is convex), so the bound holds
for a pool the user could have.

*Placed.* The band is the set of predicted-negative cells the design labels least (cells sorted
by their mean labeled share; every prefix tried).  To keep the choice from flattering the bound,
the band is chosen on the even-numbered runs and the bound evaluated on the odd-numbered ones.

Input: the runs' labeled tables from ``capture_labels.py`` (``labeled`` (R, T, X, C) at the
checkpoints, the cells).  F_K is the measure g(R) of the pool with K of the band's negatives made
positive (the cells keep their predictions, so each planted item is a false negative).

    python benchmarks/interval_study/twins_bound.py /tmp/cap/abt_ais.npz /tmp/cap/abt_poisson-adaptive.npz \\
        --rmse 0.0642,0.0305,0.0132 0.0473,0.0279,0.0085 --width 0.408,0.350,0.290 0.402,0.350,0.306
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
from bayes_eval.feasible import miss_probability  # noqa: E402


def f1_of(r):
    """F1 = R₁ / R₂ (ℓ = [y f, (y + f)/2], 001 Table 1)."""
    return r[..., 0] / r[..., 1]


def p_none_labeled(n, lab, k):
    """(R, K): P(none of K items drawn uniformly without replacement from n is among the lab labeled)
    = C(n − lab, K) / C(n, K), per run (lab (R,)) and K = 1..len(k): ``feasible.miss_probability``."""
    return miss_probability(n, np.asarray(lab, float)[:, None], np.asarray(k, float)[None, :])


def layered_bound(n, lab, f_k, alpha):
    """Σ_K (F_{K−1} − F_K) (mean_r P(E_K) − 2α)⁺ for planted counts K = 1..len(f_k)−1 (at most n)."""
    f_k = f_k[:int(n) + 1]
    k = np.arange(1, f_k.size)
    pe = p_none_labeled(n, lab, k).mean(0)
    steps = f_k[:-1] - f_k[1:]
    return float(np.sum(steps * np.clip(pe - 2 * alpha, 0.0, None)))


def single_bound(n, lab, f_k, alpha):
    """max_K (F₀ − F_K)(P(E_K) − 2α)⁺: interval_twins.md's bound, for comparison."""
    f_k = f_k[:int(n) + 1]
    k = np.arange(1, f_k.size)
    pe = p_none_labeled(n, lab, k).mean(0)
    return float(np.max((f_k[0] - f_k[1:]) * np.clip(pe - 2 * alpha, 0.0, None)))


def best_band(lab_neg, n_neg, f_k, alpha):
    """The prefix of the cells sorted by their mean labeled share (on these runs) that maximises the
    layered bound: (cell indices, bound)."""
    order = np.argsort(lab_neg.mean(0) / n_neg, kind="stable")
    n_cum = np.cumsum(n_neg[order])
    best, best_m = -1.0, 1
    for m in range(1, order.size + 1):
        if m > 8 and m % 4 and m != order.size:          # every prefix up to 8 cells, then every 4th
            continue
        b = layered_bound(n_cum[m - 1], lab_neg[:, order[:m]].sum(1), f_k, alpha)
        if b > best:
            best, best_m = b, m
    return order[:best_m], best


def analyse(path, alpha, caps=(50, None)):
    """Per checkpoint: the bounds for twins of at most each cap planted positives (None: any number),
    planted uniformly among the negatives of the under-sampled predicted-negative cells (the tail) or of
    the band."""
    z = np.load(path)
    lab = z["labeled"]                                    # (R, T, X, C)
    truth, loss, weight = z["truth"], z["loss"], z["weight"]
    r0 = np.einsum("xc,xcd->d", truth * weight[:, None], loss)
    pred = 2.0 * loss[:, 0, 1]                             # f(x): ℓ(x, 0) = [0, f/2]
    neg = np.flatnonzero((pred == 0) & (truth[:, 0] > 0))
    step = weight[neg[0]] * (loss[neg[0], 1] - loss[neg[0], 0])   # one negative made positive
    if not np.allclose(weight[neg][:, None] * (loss[neg, 1] - loss[neg, 0]), step):
        raise ValueError("the cells change R differently (non-uniform weights): not handled")
    n_neg = truth[neg, 0]
    ks = np.arange(int(n_neg.sum()) + 1)
    f_all = f1_of(r0[None, :] + ks[:, None] * step[None, :])
    runs = np.arange(lab.shape[0])
    pick, judge = runs % 2 == 0, runs % 2 == 1
    rows = []
    for t, cp in enumerate(z["checkpoints"]):
        lab_neg = lab[:, t, neg, 0]                        # (R, X') labeled negatives per cell
        # the tail: the cells the design labels below the uniform rate (labels / pool size), on the even runs
        tail = lab_neg[pick].mean(0) / n_neg < cp / truth.sum()
        lab_tail, n_tail = lab_neg[judge][:, tail].sum(1), n_neg[tail].sum()
        row = {"labels": int(cp), "tail_items": int(n_tail), "tail_labeled": float(lab_tail.mean())}
        for cap in caps:
            f_k = f_all if cap is None else f_all[:cap + 1]
            band, _ = best_band(lab_neg[pick], n_neg, f_k, alpha)
            lab_band = lab_neg[judge][:, band].sum(1)
            # the library's own interval (captured) on the twin with the cap planted in the band: on E it is
            # the pool's, so the runs where E holds and that interval misses F_cap are misses on the twin
            kk = f_k.size - 1
            pe_band = p_none_labeled(n_neg[band].sum(), lab_neg[judge][:, band].sum(1), [kk])[:, 0]
            lo, hi = z["bayes_lower"][judge, t, 0], z["bayes_upper"][judge, t, 0]
            miss = ~((lo <= f_k[-1]) & (f_k[-1] <= hi))
            row[cap] = {"tail": layered_bound(n_tail, lab_tail, f_k, alpha),
                        "twin_value": float(f_k[-1]), "library_misses_twin": float(np.mean(pe_band * miss)),
                        "tail_single": single_bound(n_tail, lab_tail, f_k, alpha),
                        "band": layered_bound(n_neg[band].sum(), lab_band, f_k, alpha),
                        "band_cells": int(band.size), "band_items": int(n_neg[band].sum()),
                        "band_labeled": float(lab_band.mean())}
        rows.append(row)
    return float(f_all[0]), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("npz", nargs="+")
    ap.add_argument("--alpha", type=float, default=0.07, help="1 − the coverage demanded (the target's lower end: 0.07)")
    ap.add_argument("--cap", type=int, default=50, help="the smaller family: twins with at most this many planted positives")
    ap.add_argument("--rmse", nargs="*", default=None, help="per npz: the design's RMSE at the checkpoints, comma-separated")
    ap.add_argument("--width", nargs="*", default=None, help="per npz: the library's Bayesian mean width at the checkpoints")
    a = ap.parse_args()
    caps = (a.cap, None)

    def cell(b, rmse):
        return f"{b:.3f}" + (f" ({b / rmse:.1f})" if rmse else "")

    print(f"α = {a.alpha}. Bounds on the mean width on the pool (÷ the design's RMSE there); tail = the "
          f"predicted-negative cells labeled below the uniform rate (labels ÷ pool size); band = the least-labeled cells (chosen on the even runs, evaluated on the odd).\n")
    print(f"| runs | labels | tail items (labeled) | single K ≤ {a.cap}, tail | layered K ≤ {a.cap}: tail / band | "
          "layered, any K: tail / band | band (cells, items, labeled) | library's Bayesian width | "
          f"its misses on the band's {a.cap}-positive twin (F1 there), at least |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, path in enumerate(a.npz):
        rmse = [float(x) for x in a.rmse[i].split(",")] if a.rmse else [None] * 3
        width = [float(x) for x in a.width[i].split(",")] if a.width else None
        f0, rows = analyse(path, a.alpha, caps)
        for t, r in enumerate(rows):
            c, u = r[a.cap], r[None]
            lib = cell(width[t], rmse[t]) if width else "–"
            print(f"| {os.path.basename(path)} (F₀ {f0:.4f}) | {r['labels']} | {r['tail_items']} ({r['tail_labeled']:.0f}) | "
                  f"{cell(c['tail_single'], rmse[t])} | {cell(c['tail'], rmse[t])} / {cell(c['band'], rmse[t])} | "
                  f"{cell(u['tail'], rmse[t])} / {cell(u['band'], rmse[t])} | {u['band_cells']}, {u['band_items']}, "
                  f"{u['band_labeled']:.1f} | {lib} | {c['library_misses_twin']:.2f} ({c['twin_value']:.3f}) |")


if __name__ == "__main__":
    main()
