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
  items taken with certainty, as the F1-optimal Poisson designs do);
* ``adaptive-sqrt`` / ``adaptive-near``: the same shapes in ``--rounds`` Poisson rounds of
  n / rounds expected labels over the items not labeled yet, p̃ replaced after each round by
  the labels' own rate in the item's score bin (20 equal-count bins; Beta(1, 1) posterior mean,
  the classifier's p̃ where a bin has no label) -- adaptive as poisson-adaptive is: where the
  first labels of a region come out negative, the next rounds label less there.  The posterior
  ignores the design either way (the selection is ignorable); what changes is which labels it sees.

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


def inclusion(design, s, n, beta, p=None, free_mask=None):
    """Inclusion probabilities of ``n`` expected labels; ``p`` the rate the shape is taken at
    (default: the classifier's own probability), ``free_mask`` the items that may be drawn."""
    if p is None:
        p = 1 / (1 + np.exp(-s))              # the classifier's own probability (uncalibrated)
    design = design.removeprefix("adaptive-")
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
    if free_mask is not None:
        w = np.where(free_mask, w, 0.0)
    pi = np.zeros_like(s)
    fixed = np.zeros(s.shape, bool)
    for _ in range(50):                       # water-filling: cap at 1, spread the rest
        free = ~fixed & (w > 0)
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


def adaptive_labels(rng, design, s, y, n, rounds, n_bins=20):
    """The labeled mask of ``rounds`` Poisson rounds, each shaped at the labels' own rate per
    score bin so far (the classifier's probability in a bin without labels)."""
    edges = np.quantile(s, np.linspace(0, 1, n_bins + 1)[1:-1])
    b = np.searchsorted(edges, s)
    p0 = 1 / (1 + np.exp(-s))
    lab = np.zeros(s.shape[0], bool)
    for r in range(rounds):
        n_lab = np.bincount(b[lab], minlength=n_bins)
        n_pos = np.bincount(b[lab], weights=y[lab], minlength=n_bins)
        rate = (n_pos + 1) / (n_lab + 2)
        p = np.where(n_lab[b] > 0, rate[b], p0)
        pi = inclusion(design, s, n / rounds, None, p=p, free_mask=~lab)
        lab |= (~lab) & (rng.random(s.shape[0]) < pi)
    return lab


def one_run(rng, s, y, pi, draws, lab=None):
    if lab is None:
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
    ap.add_argument("--rounds", type=int, default=10, help="rounds of the adaptive designs")
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
                if design.startswith("adaptive-"):
                    lab = adaptive_labels(rng, design, s, y, a.n, a.rounds)
                    pi = np.zeros_like(s)                 # ("certain items": none is before the run)
                    lo, hi, m, _ = one_run(rng, s, y, None, a.draws, lab=lab)
                else:
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
