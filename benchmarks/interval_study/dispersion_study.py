"""Is the calibrated model's posterior as dispersed as its error? (issue 15, item 1: the 10% pool's
poisson-adaptive shortfall, after ``shortfall.md`` and ``kappa_prior.md``.)

On captured runs (``capture_labels.py``), per checkpoint, with the library's model and interval
machinery (400 draws, the draws' own (a, b, κ)):

- **the curve**: the posterior mean of (a, b) averaged over runs, its SD over runs (the error's
  spread), and the posterior SD averaged over runs (what the model claims), with the importance
  sampler's ESS (of 1024 proposals).  A calibrated posterior claims what it errs: ratio ≈ 1.
- **the measure**: the same for F1 on the pool (the posterior mean's bias, its SD over runs, the
  mean posterior SD), and the ratio of the root mean squared error of the posterior mean to the
  mean posterior SD (≈ 1 when the posterior is calibrated; above 1, over-confident); and the
  posterior SD split into the part from the rates (the same draws with every unlabeled cell
  completed at its expected counts) and the rest, the unlabeled items' binomial draw.

    python benchmarks/interval_study/dispersion_study.py /tmp/istudy/p0.1.parquet /tmp/jensen/p01pa.npz \\
        /tmp/istudy/p0.1.parquet /tmp/jensen/p01ais.npz

Writes ``benchmarks/results/dispersion.md`` (``--out``); about a minute per capture on one core.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bayes_eval import measures as M  # noqa: E402
from bayes_eval import simulate as S  # noqa: E402
from bayes_eval.cells import build_cells, leaf_counts, posterior_units  # noqa: E402
from bayes_eval.models import calibrated as C  # noqa: E402
from bayes_eval.posterior import calibrated_pi, pool_posterior_from_pi  # noqa: E402
from bayes_eval.registry import load_pool  # noqa: E402
from bayes_eval.strata import stratify  # noqa: E402

OUT = os.path.join(ROOT, "benchmarks", "results", "dispersion.md")


def study(pool_path, capture, draws, prior="library"):
    from kappa_prior_study import PRIORS, log_post_with  # beside this file

    lp = log_post_with(PRIORS[prior])
    pool, d = load_pool(pool_path), np.load(capture)
    n_strata = inspect.signature(S.run_simulation).parameters["n_strata"].default
    strata = stratify(pool, n_strata)
    cells, _ = build_cells(pool, strata, M.get("f1"))
    if not np.allclose(np.asarray(cells.size), d["size"]):
        raise SystemExit(f"{capture}: its cells are not {pool_path}'s")
    units = posterior_units(cells, strata.n_strata, "cell")
    uc, n_units = units.cells, units.n_units
    z = jnp.log(units.probs[:, 1]) - jnp.log1p(-units.probs[:, 1])
    g, t = M.get("f1").g, float(d["true_value"][0])

    @jax.jit
    def one(key, lab):
        counts = leaf_counts(uc, lab, n_units)[0]
        st = C.fit_mode(z, counts, n_iter=40, log_post=lp)
        k1, k2, k3 = jax.random.split(key, 3)
        th, ess = C.sample_params(k1, z, counts, st, draws, log_post=lp)
        pi = calibrated_pi(k2, units.probs, counts, th[:, 0], th[:, 1], jnp.exp(th[:, 2]))
        v = pool_posterior_from_pi(k3, g, uc, lab, pi, n_units).value[:, 0]
        # the same draws with every unlabeled cell completed at its expected counts, U_x π(·|x):
        # their spread is the part of the posterior from the rates (curve and departures), the
        # rest is the unlabeled items' own binomial draw
        unl = jnp.maximum(uc.size - lab.sum(1), 0.0)
        risk = jnp.einsum("x,nxc,xcd->nd", uc.weight, lab[None] + unl[None, :, None] * pi[:, uc.stratum], uc.loss)
        ve = jax.vmap(lambda r: jnp.atleast_1d(g(r))[0])(risk)
        return jnp.concatenate([th[:, :2].mean(0), th[:, :2].std(0), jnp.stack([ess, v.mean(), v.std(), ve.std()])])

    rows = []
    for c, n in enumerate(d["checkpoints"]):
        r = np.array([np.asarray(one(jax.random.PRNGKey(i), jnp.asarray(d["labeled"][i, c])))
                      for i in range(d["labeled"].shape[0])])
        err = r[:, 5] - t
        rows.append(dict(labels=int(n), a=r[:, 0].mean(), b=r[:, 1].mean(), a_sd=r[:, 0].std(), b_sd=r[:, 1].std(),
                         a_post=r[:, 2].mean(), b_post=r[:, 3].mean(), ess=float(np.median(r[:, 4])),
                         bias=err.mean(), f_sd=r[:, 5].std(), f_post=r[:, 6].mean(),
                         ratio=math.sqrt(np.mean(err ** 2)) / r[:, 6].mean(), f_rates=r[:, 7].mean(),
                         f_binom=float(np.sqrt(np.maximum(r[:, 6] ** 2 - r[:, 7] ** 2, 0.0)).mean())))
        print(os.path.basename(capture), rows[-1], flush=True)
    return t, d["labeled"].shape[0], rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="POOL CAPTURE.npz pairs")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--prior", default="library", help="a prior on log κ of kappa_prior_study.PRIORS")
    a = ap.parse_args(argv)
    if len(a.pairs) % 2:
        raise SystemExit("give POOL CAPTURE.npz pairs")
    lines = ["# The calibrated model's dispersion against its error, on captured runs", "",
             f"Generated by `python benchmarks/interval_study/dispersion_study.py {' '.join(a.pairs)}` "
             f"({a.draws} posterior draws per run; prior on log κ: {a.prior}). Per checkpoint: the curve's (a, b) "
             "posterior mean averaged over runs, its SD over runs against the mean posterior SD, the "
             "sampler's median ESS of 1024; F1's posterior mean − truth, its SD over runs against the mean "
             "posterior SD, and RMSE of the posterior mean ÷ mean posterior SD (1 when calibrated).", "",
             "| capture | runs | labels | a, b (mean) | a: SD over runs / posterior SD | b: SD over runs / posterior SD "
             "| ESS | F1 posterior mean − truth | F1: SD over runs / posterior SD | RMSE ÷ posterior SD "
             "| posterior SD from the rates / from the binomial draw |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for pool_path, capture in zip(a.pairs[::2], a.pairs[1::2]):
        t, runs, rows = study(pool_path, capture, a.draws, a.prior)
        for r in rows:
            lines.append(f"| {os.path.basename(capture)} (F1 {t:.4f}) | {runs} | {r['labels']} | {r['a']:.3f}, {r['b']:.3f} | "
                         f"{r['a_sd']:.4f} / {r['a_post']:.4f} | {r['b_sd']:.4f} / {r['b_post']:.4f} | {r['ess']:.0f} | "
                         f"{r['bias']:+.4f} | {r['f_sd']:.4f} / {r['f_post']:.4f} | {r['ratio']:.3f} | "
                         f"{r['f_rates']:.4f} / {r['f_binom']:.4f} |")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", a.out)


if __name__ == "__main__":
    main()
