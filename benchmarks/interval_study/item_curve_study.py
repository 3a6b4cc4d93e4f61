"""Issue 15, the 10% pool's poisson-adaptive shortfall: is it the cells?  The library's
posterior (``models/calibrated.py``) works on cells -- a rate per cell around a calibration
curve taken at the cell's mean probability.  This study gives the *same captured runs* the
posterior of the right model at the item level: the synthetic pools of ``benchmarks/run.py``
have a positive rate exactly logistic in the score (equal-variance Gaussian classes), so
``logit p(y = 1 | s) = α + β s`` with two parameters and no departure is the generator's own
model (s: the classifier's logit, the score itself for margins; for the balanced pool of
``make_pools.py --kinds``, whose probabilities are sigmoid(margin), the same holds in their logit).  If that posterior covers where the cells' does not, the cells lose something; if it
misses alike, the shortfall is the design's and the pool's, not the model's.

Per captured run and checkpoint: each cell's labeled counts (n₀, n₁) become labeled items,
n₁ of the cell's positives and n₀ of its negatives chosen uniformly (the cell's items are
interchangeable to the design, so this is the labeled set's distribution); (α, β) get the
library's prior (N(0, 3²), N(1, 1.5²)) and a Laplace posterior at the mode (Newton; with
hundreds of labels the Laplace posterior of a two-parameter logistic regression is close to
exact), ``--draws`` draws; the unlabeled items' positives among the predicted positives and
among the predicted negatives are drawn per (α, β) from the normal approximation of their
Poisson-binomial sums (thousands of items each); F1's finite-pool draws get the library's
highest-density interval (``posterior.highest_density``; no one-item floor: hundreds of
positives).

    python benchmarks/interval_study/capture_labels.py /tmp/istudy/p0.1.parquet \\
        --design poisson-adaptive --repeats 200 --out /tmp/cap/p0.1_pa.npz
    python benchmarks/interval_study/item_curve_study.py /tmp/istudy/p0.1.parquet /tmp/cap/p0.1_pa.npz
    python benchmarks/interval_study/item_curve_study.py --table

Each capture gives ``benchmarks/results/item_curve/<capture name>.json`` (name it POOL_DESIGN.npz:
the table splits it at the last underscore; an existing JSON is kept unless ``--force``), and
``--table`` writes ``benchmarks/results/item_curve.md`` (its reading below "## What this says"
survives).  About 4 s per run (three checkpoints) on one core.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from audit_study import write_table  # noqa: E402  (beside this file)
from capture_labels import load_capture  # noqa: E402
from bayes_eval.models.calibrated import PRIOR  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
OUT_DIR = os.path.join(ROOT, "benchmarks", "results", "item_curve")
TABLE = os.path.join(ROOT, "benchmarks", "results", "item_curve.md")

PRIOR_MEAN = np.array([PRIOR["a"][0], PRIOR["b"][0]])   # the library's prior on the curve's (a, b)
PRIOR_SD = np.array([PRIOR["a"][1], PRIOR["b"][1]])


def labeled_items(item_cell, y, counts, rng):
    """A boolean mask of labeled items: per cell, counts[x, 1] of its positives and
    counts[x, 0] of its negatives, uniformly."""
    key = rng.random(item_cell.shape[0])
    order = np.lexsort((key, y, item_cell))                 # by cell, class, then at random
    grp = item_cell[order] * 2 + y[order]
    start = np.r_[0, np.flatnonzero(np.diff(grp)) + 1]
    rank = np.arange(order.shape[0]) - np.repeat(start, np.diff(np.r_[start, order.shape[0]]))
    want = counts.reshape(-1)[grp]
    mask = np.zeros(item_cell.shape[0], bool)
    mask[order] = rank < np.round(want)
    return mask


def laplace(s, y, n_iter=25):
    """Mode and covariance of (α, β) for logit p = α + β s under the prior."""
    import jax.numpy as jnp
    X = jnp.stack([jnp.ones_like(s), s], axis=1)
    th = jnp.asarray(PRIOR_MEAN)
    prec0 = jnp.diag(1.0 / jnp.asarray(PRIOR_SD) ** 2)
    for _ in range(n_iter):
        p = 1.0 / (1.0 + jnp.exp(-(X @ th)))
        g = X.T @ (y - p) - prec0 @ (th - jnp.asarray(PRIOR_MEAN))
        H = (X * (p * (1 - p))[:, None]).T @ X + prec0
        th = th + jnp.linalg.solve(H, g)
    p = 1.0 / (1.0 + jnp.exp(-(X @ th)))
    H = (X * (p * (1 - p))[:, None]).T @ X + prec0
    return th, jnp.linalg.inv(H)


def f1_draws(key, th, cov, s_pp, s_pn, known, n_draws):
    """F1 draws on the pool: ``known`` = (TP, FP, FN) among labeled items; s_pp, s_pn the
    scores of the unlabeled predicted positives / negatives."""
    import jax
    import jax.numpy as jnp
    k1, k2, k3 = jax.random.split(key, 3)
    ab = th + jax.random.normal(k1, (n_draws, 2)) @ jnp.linalg.cholesky(cov).T
    return f1_of_curves(ab, s_pp, s_pn, known, k2, k3)


def f1_of_curves(ab, s_pp, s_pn, known, key_pp, key_pn):
    """F1 draws on the pool for curve draws ``ab`` (n, 2): the unlabeled positives among the
    predicted positives / negatives from the normal approximation of their Poisson-binomial sums."""
    import jax
    import jax.numpy as jnp

    def sums(sc, k):
        p = jax.nn.sigmoid(ab[:, :1] + ab[:, 1:] * sc[None, :])
        m, v = p.sum(1), (p * (1 - p)).sum(1)
        return jnp.clip(m + jnp.sqrt(v) * jax.random.normal(k, (ab.shape[0],)), 0.0, sc.shape[0])
    tp_u, fn_u = sums(s_pp, key_pp), sums(s_pn, key_pn)
    tp = known[0] + tp_u
    fp = known[1] + (s_pp.shape[0] - tp_u)
    fn = known[2] + fn_u
    return 2 * tp / (2 * tp + fp + fn)


def study(pool_path, capture, n_draws, seed, runs=None):
    """Coverage, width and the posterior mean's error of the library's interval (the capture's)
    and of the item-level model's, per checkpoint, on the capture's runs."""
    import jax
    import jax.numpy as jnp
    from bayes_eval.posterior import highest_density

    cap = load_capture(pool_path, capture)
    d, truth = cap.data, cap.truth
    item_cell = cap.item_cell
    y = np.asarray(cap.pool.labels).astype(np.int64)
    prob = np.clip(np.asarray(cap.pool.probs[:, 0, 1], np.float64), 1e-12, 1 - 1e-12)
    s = np.log(prob) - np.log1p(-prob)    # the classifier's logit: the score for margins (sigmoid(score))
    pred = np.asarray(cap.pool.preds[:, 0]).astype(bool)
    lab = d["labeled"]
    runs = lab.shape[0] if runs is None else min(runs, lab.shape[0])
    rng = np.random.default_rng(seed)
    key = jax.random.PRNGKey(seed)
    lo, hi, mean = (np.full((runs, lab.shape[1]), np.nan) for _ in range(3))
    for r in range(runs):
        for c in range(lab.shape[1]):
            m = labeled_items(item_cell, y, lab[r, c], rng)
            th, cov = laplace(jnp.asarray(s[m]), jnp.asarray(y[m], jnp.float64))
            known = jnp.array([np.sum(m & pred & (y == 1)), np.sum(m & pred & (y == 0)),
                               np.sum(m & ~pred & (y == 1))], jnp.float64)
            key, k = jax.random.split(key)
            f = f1_draws(k, th, cov, jnp.asarray(s[~m & pred]), jnp.asarray(s[~m & ~pred]), known, n_draws)
            l, h = highest_density(f[:, None])
            lo[r, c], hi[r, c], mean[r, c] = float(l[0]), float(h[0]), float(jnp.mean(f))
    rows = []
    for c, ck in enumerate(d["checkpoints"]):
        bl, bu = d["bayes_lower"][:runs, c, 0], d["bayes_upper"][:runs, c, 0]
        err = mean[:, c] - truth
        rows.append(dict(labels=int(ck), library_coverage=float(np.mean((bl <= truth) & (truth <= bu))),
                         library_width=float(np.mean(bu - bl)),
                         item_coverage=float(np.mean((lo[:, c] <= truth) & (truth <= hi[:, c]))),
                         item_width=float(np.mean(hi[:, c] - lo[:, c])),
                         item_bias=float(np.mean(err)), item_rmse=float(np.sqrt(np.mean(err ** 2)))))
    return dict(pool=pool_path, capture=capture, truth=truth, runs=runs, draws=n_draws, seed=seed, rows=rows)


def table(out_dir, out):
    files = sorted(glob.glob(os.path.join(out_dir, "*.json")))
    lines = ["# The library's interval against the generator's own model, on the same runs", "",
             "Generated by `python benchmarks/interval_study/item_curve_study.py --table` from "
             "`benchmarks/results/item_curve/*.json` (one per captured simulation: "
             "`item_curve_study.py POOL CAPTURE`; the script's docstring says what the item-level model is). "
             "Per checkpoint: the library's Bayesian interval as the simulation computed it (cells, "
             "calibrated Beta-binomial, 200 draws) and the item-level two-parameter logistic posterior "
             "(the synthetic pools' true model; 400 draws) on the same labels: coverage, mean width, "
             "and the item-level posterior mean's bias and RMSE. Binomial SE of a coverage at 200 runs: 0.015.", "",
             "| pool | design | runs | labels | library: coverage (width) | item-level model: coverage (width) "
             "| width ratio library ÷ item-level | item-level posterior mean − truth, RMSE |",
             "|---|---|---|---|---|---|---|---|"]
    for f in files:
        with open(f) as fh:
            d = json.load(fh)
        name = os.path.basename(f)[:-5]
        pool, design = name.rsplit("_", 1)
        for r in d["rows"]:
            lines.append(f"| {pool} (F1 {d['truth']:.4f}) | {design} | {d['runs']} | {r['labels']} | "
                         f"{r['library_coverage']:.3f} ({r['library_width']:.4f}) | "
                         f"{r['item_coverage']:.3f} ({r['item_width']:.4f}) | "
                         f"{r['library_width'] / r['item_width']:.3f} | {r['item_bias']:+.4f}, {r['item_rmse']:.4f} |")
    write_table(out, lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="*", help="POOL CAPTURE.npz pairs; each writes OUT_DIR/<capture name>.json")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=OUT_DIR)
    ap.add_argument("--force", action="store_true", help="redo a capture whose JSON exists")
    ap.add_argument("--table", action="store_true", help="write the table from OUT_DIR")
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        raise SystemExit("give POOL CAPTURE.npz pairs")
    os.makedirs(a.out_dir, exist_ok=True)
    for pool_path, capture in zip(a.pairs[::2], a.pairs[1::2]):
        out = os.path.join(a.out_dir, os.path.basename(capture)[:-4] + ".json")
        if os.path.exists(out) and not a.force:
            print("kept", out)
            continue
        res = study(pool_path, capture, a.draws, a.seed, a.runs)
        with open(out, "w") as fh:
            json.dump(res, fh, indent=1)
        print(out, res["rows"], flush=True)
    if a.table:
        table(a.out_dir, TABLE)


if __name__ == "__main__":
    main()
