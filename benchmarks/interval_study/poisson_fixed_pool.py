"""Issue 15: does a *correct* posterior hold its 95% under Poisson sampling on a fixed pool?

``item_curve.md`` found the generator's own model (an item-level logistic curve) as narrow as
the library's interval and missing as often under poisson-adaptive, and static Poisson sampling
missing alike.  This strips everything else away: a balanced pool drawn from
``logit p(y = 1 | s) = β s`` (two Gaussian classes, as ``make_pools.py --kinds``'s balanced
pool), one round of Bernoulli sampling with inclusion probabilities π_i (expected ``--n``
labels), the two-parameter logistic posterior (Laplace at the mode, flat prior) and the
finite-pool posterior of F1 (the unlabeled items' labels drawn per curve draw; predictions
``s ≥ 0``).  Designs:

* ``uniform``: π_i = n / N;
* ``sqrt``: π_i ∝ sqrt(p̃_i (1 − p̃_i)) with p̃ the classifier's own probability, capped at 1
  (water-filling) -- the shape of the variance-minimizing Poisson designs of 000 §2;
* ``positive``: π_i ∝ p̃_i, capped (labels where the positives are);
* ``near``: π_i ∝ (p̃_i (1 − p̃_i))⁴, capped (labels crowded at the decision threshold, with
  items taken with certainty, as the F1-optimal Poisson designs do).

Each design runs ``--runs`` times on one fixed pool and, separately, on a fresh pool per run
(coverage over the generator).  Reported: coverage of the equal-tailed 95% interval, its mean
width ÷ the RMSE of the posterior mean, and the posterior mean's bias.

    python benchmarks/interval_study/poisson_fixed_pool.py --runs 1000
"""
from __future__ import annotations

import argparse

import numpy as np


def pool(rng, n_items, beta, sep):
    y = (rng.random(n_items) < 0.5).astype(np.int64)
    s = np.where(y == 1, rng.normal(sep / 2, 1.0, n_items), rng.normal(-sep / 2, 1.0, n_items))
    return s, y


def inclusion(design, s, n, beta):
    p = 1 / (1 + np.exp(-s))                  # the classifier's own probability (uncalibrated)
    if design == "uniform":
        w = np.ones_like(s)
    elif design == "sqrt":
        w = np.sqrt(p * (1 - p))
    elif design == "positive":
        w = p
    elif design == "near":
        w = (p * (1 - p)) ** 4
    else:
        raise ValueError(design)
    pi = np.zeros_like(s)
    fixed = np.zeros(s.shape, bool)
    for _ in range(50):                       # water-filling: cap at 1, spread the rest
        free = ~fixed
        pi[free] = w[free] * (n - fixed.sum()) / w[free].sum()
        over = free & (pi >= 1)
        if not over.any():
            break
        fixed |= over
        pi[fixed] = 1.0
    return np.minimum(pi, 1.0)


def laplace(x, y, n_iter=30):
    X = np.stack([np.ones_like(x), x], 1)
    th = np.zeros(2)
    for _ in range(n_iter):
        p = 1 / (1 + np.exp(-X @ th))
        H = (X * (p * (1 - p))[:, None]).T @ X + 1e-6 * np.eye(2)
        th = th + np.linalg.solve(H, X.T @ (y - p))
    p = 1 / (1 + np.exp(-X @ th))
    H = (X * (p * (1 - p))[:, None]).T @ X
    return th, np.linalg.inv(H)


def one_run(rng, s, y, pi, draws):
    lab = rng.random(s.shape[0]) < pi
    th, cov = laplace(s[lab], y[lab].astype(float))
    pred = s >= 0
    tp_k = np.sum(lab & pred & (y == 1))
    fp_k = np.sum(lab & pred & (y == 0))
    fn_k = np.sum(lab & ~pred & (y == 1))
    ab = rng.multivariate_normal(th, cov, size=draws)
    def drawn(sc):
        p = 1 / (1 + np.exp(-(ab[:, :1] + ab[:, 1:] * sc[None, :])))
        m, v = p.sum(1), (p * (1 - p)).sum(1)
        return np.clip(m + np.sqrt(v) * rng.standard_normal(draws), 0, sc.shape[0])
    s_pp, s_pn = s[~lab & pred], s[~lab & ~pred]
    tp_u, fn_u = drawn(s_pp), drawn(s_pn)
    tp, fp, fn = tp_k + tp_u, fp_k + s_pp.shape[0] - tp_u, fn_k + fn_u
    f = 2 * tp / (2 * tp + fp + fn)
    return np.quantile(f, 0.025), np.quantile(f, 0.975), f.mean(), int(lab.sum())


def f1_of(s, y):
    pred = s >= 0
    tp = np.sum(pred & (y == 1))
    return 2 * tp / (2 * tp + np.sum(pred & (y == 0)) + np.sum(~pred & (y == 1)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--sep", type=float, default=1.6)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--designs", default="uniform,sqrt,positive,near")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    beta = a.sep  # logit p = sep * s for classes N(±sep/2, 1) at prevalence 1/2
    print(f"pool: {a.items} items, classes N(±{a.sep / 2}, 1), {a.n} expected labels, {a.runs} runs, {a.draws} draws")
    print("| design | pools | certain items | coverage | width ÷ RMSE | bias ÷ RMSE |")
    print("|---|---|---|---|---|---|")
    for design in a.designs.split(","):
        for fresh in (False, True):
            rng = np.random.default_rng(a.seed)
            s, y = pool(np.random.default_rng(10_000 + a.seed), a.items, beta, a.sep)
            out = []
            for r in range(a.runs):
                if fresh:
                    s, y = pool(rng, a.items, beta, a.sep)
                pi = inclusion(design, s, a.n, beta)
                lo, hi, m, _ = one_run(rng, s, y, pi, a.draws)
                out.append((lo, hi, m, f1_of(s, y), int(np.sum(pi >= 1))))
            o = np.array(out)
            err = o[:, 2] - o[:, 3]
            rmse = np.sqrt(np.mean(err ** 2))
            cov = np.mean((o[:, 0] <= o[:, 3]) & (o[:, 3] <= o[:, 1]))
            print(f"| {design} | {'fresh each run' if fresh else 'one fixed'} | {o[:, 4].mean():.0f} | {cov:.3f} | "
                  f"{np.mean(o[:, 1] - o[:, 0]) / rmse:.2f} | {np.mean(err) / rmse:+.2f} |", flush=True)


if __name__ == "__main__":
    main()
