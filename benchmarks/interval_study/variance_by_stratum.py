"""Where the Bayesian interval's width comes from (issue 15, item 1: "check by decomposing
the posterior variance by stratum").  For runs captured by ``capture_labels.py``, the
library's finite-pool posterior (calibrated Beta-binomial, ``models/calibrated.py``) is drawn
again with its parameters kept, and the hidden positives H = Σ_k H_k (positives among the
unlabeled items; F1 moves with H, their correlation is printed) are decomposed two ways:

* **level vs. dispersion** (law of total variance over θ = (a, b, κ)):
  Var H = Var_θ E[H | θ] + E_θ Var(H | θ), with E[H_k | θ] = U_k (κ μ_k + n_k1) / (κ + n_k)
  in closed form.  The first part is the calibration curve's uncertainty (the tail's
  *level*); the second is the strata's departure from the curve (κ) and the binomial draw.
* **by stratum band**: Var H = Σ_k Cov(H_k, H), summed over bands of strata by the share of
  their items labeled (≥ 50%, 1–50%, < 1%, none).

    python benchmarks/interval_study/capture_labels.py ../shared/data/abt-buy.parquet --repeats 100 --out /tmp/cap/abt.npz
    python benchmarks/interval_study/variance_by_stratum.py /tmp/cap/abt.npz --runs 20 [--found K]

``--found K``: only runs that have labeled exactly K positives at the checkpoint.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.cells import leaf_counts  # noqa: E402
from bayes_eval.models.calibrated import score_logit, calibrated_model  # noqa: E402
from bayes_eval.posterior import pool_posterior_from_pi  # noqa: E402

sys.path.insert(0, HERE)
from monotone_study import cells_of  # noqa: E402

BANDS = (("≥ 50% labeled", 0.5, 1.01), ("1–50%", 0.01, 0.5), ("< 1%", 1e-12, 0.01), ("none", -1, 1e-12))


def decompose(d, run, cp, draws, key):
    cells = cells_of(d)
    k = d["leaf_probs"].shape[0]
    lab = jnp.asarray(d["labeled"][run, cp])
    counts, unl = leaf_counts(cells, lab, k)
    model = calibrated_model(d["leaf_probs"])
    k1, k2 = jax.random.split(key)
    s = model.sample(k1, counts, unl, draws)
    post = pool_posterior_from_pi(k2, M.get("f1").g, cells, lab, s["pi"], k)
    h_k = np.asarray(post.unlabeled_counts[..., 1])          # (n, K) hidden positives per stratum
    h = h_k.sum(1)
    f1 = np.asarray(post.value[:, 0])
    z = np.asarray(score_logit(d["leaf_probs"]))
    counts, unl = np.asarray(counts), np.asarray(unl)
    kappa = np.asarray(s["kappa"])[:, None]
    mu = 1.0 / (1.0 + np.exp(-(np.asarray(s["a"])[:, None] + np.asarray(s["b"])[:, None] * z[None, :])))
    e_h = (unl[None, :] * (kappa * mu + counts[None, :, 1]) / (kappa + counts.sum(1)[None, :])).sum(1)
    var_h = h.var()
    share_lab = counts.sum(1) / np.maximum(counts.sum(1) + unl, 1)
    cov_k = ((h_k - h_k.mean(0)) * (h - h.mean())[:, None]).mean(0)
    bands = {}
    for name, lo, hi in BANDS:
        m = (share_lab >= lo) & (share_lab < hi) & (counts.sum(1) + unl > 0)
        bands[name] = (int(m.sum()), float(unl[m].sum()), float(h_k[:, m].mean(0).sum()),
                       float(cov_k[m].sum() / var_h) if var_h > 0 else np.nan)
    c = np.corrcoef(h, f1)[0, 1] if h.std() > 0 and f1.std() > 0 else np.nan
    return dict(eh=float(h.mean()), sdh=float(np.sqrt(var_h)), level=float(e_h.var() / var_h) if var_h > 0 else np.nan,
                corr=float(c), bands=bands, f1_width=float(np.quantile(f1, 0.975) - np.quantile(f1, 0.025)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("npz")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--found", type=int, default=None)
    a = ap.parse_args(argv)
    d = np.load(a.npz)
    t = float(d["true_value"][0])
    print(f"{a.npz}: true F1 {t:.4f}, {int(d['truth'][:, 1].sum())} positives")
    for cp, n in enumerate(d["checkpoints"]):
        found = d["labeled"][:, cp, :, 1].sum(-1).round().astype(int)
        runs = np.flatnonzero(found == a.found) if a.found is not None else np.arange(found.size)
        runs = runs[: a.runs]
        if runs.size == 0:
            continue
        res = [decompose(d, int(r), cp, a.draws, jax.random.PRNGKey(int(r))) for r in runs]
        mean = lambda f: np.nanmean([f(x) for x in res])  # noqa: E731
        print(f"{int(n)} labels, {runs.size} runs: F1 width {mean(lambda x: x['f1_width']):.3f}; hidden positives "
              f"E {mean(lambda x: x['eh']):.2f}, sd {mean(lambda x: x['sdh']):.2f}; corr(H, F1) "
              f"{mean(lambda x: x['corr']):.2f}; share of Var H from the curve's level (a, b, κ) "
              f"{mean(lambda x: x['level']):.2f}")
        for name, *_ in BANDS:
            print(f"   strata {name:>14}: {mean(lambda x: x['bands'][name][0]):6.1f} strata, "
                  f"{mean(lambda x: x['bands'][name][1]):8.0f} unlabeled items, E hidden "
                  f"{mean(lambda x: x['bands'][name][2]):6.2f}, share of Var H {mean(lambda x: x['bands'][name][3]):5.2f}")


if __name__ == "__main__":
    main()
