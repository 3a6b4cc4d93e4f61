"""Bayesian and CLT intervals side by side, on a pool with known labels.

    python examples/bayes_vs_clt.py [POOL.parquet] [--budget 1000] [--models calibrated,dirichlet-tree]
                                    [--method nuts] [--out bayes_vs_clt] [--md FILE] [--thresholds 40] [--seed 0]

Runs an AIS labeling session (001 Alg. 1; the pool's ground truth plays the annotator)
for F1 and a PR curve, then the finite-pool posterior of both (001 §4; docs/architecture.md) under each
oracle model, and writes

* ``OUT/posterior_f1_POOL.png`` — the posterior density of F1, the CLT interval
  (001 §3.3.2) and the importance-weighted estimate;
* ``OUT/pr_band_POOL.png`` — the PR curve with its Bayesian band and its CLT band;
* ``OUT/ppc_POOL.png`` (first model) and ``OUT/ppc_MODEL_POOL.png`` (the others) —
  posterior predictive checks of the labels per stratum;
* the side-by-side table in markdown on stdout (and to ``--md FILE``).

Without a pool argument it uses ../shared/data/abt-buy.parquet when present, else the
built-in synthetic demo pool.
"""
import argparse
import os
import tempfile
import time
import warnings

warnings.filterwarnings("ignore", category=FutureWarning)  # ArviZ 0.23 announces its 1.x refactor

import numpy as np  # noqa: E402

import bayes_eval as be  # noqa: E402
from bayes_eval import measures as M  # noqa: E402
from bayes_eval import report as R  # noqa: E402
from bayes_eval.session import Session  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_POOL = os.path.join(HERE, "..", "..", "shared", "data", "abt-buy.parquet")


def _md(df, cols, fmt="{:.3f}"):
    """A small markdown table (no extra dependency)."""
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, (float, np.floating)):
                cells.append("—" if not np.isfinite(v) else (f"{v:.0f}" if c.startswith("ess") else fmt.format(v)))
            else:
                cells.append(str(v))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pool", nargs="?", default=None)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--models", default="calibrated,dirichlet-tree")
    ap.add_argument("--method", default="nuts", choices=R.METHODS)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--thresholds", type=int, default=40, help="thresholds of the PR curve")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="bayes_vs_clt", help="folder of the PNGs (the README's figures: --out docs)")
    ap.add_argument("--md", default=None, help="also write the printed tables to this markdown file")
    args = ap.parse_args(argv)

    path = args.pool or (DEFAULT_POOL if os.path.exists(DEFAULT_POOL) else None)
    pool = be.Pool.from_file(path) if path else be.demo_pool()
    name = pool.name
    s = pool.scores[:, 0]
    # the PR curve where it moves: from the 98th score percentile to the top score
    thr = np.linspace(np.quantile(s, 0.98), s.max(), args.thresholds)
    measures = [M.f1(), M.pr_curve(thr)]
    truth = pool.true_value(M.stack(*measures))
    os.makedirs(args.out, exist_ok=True)

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        session = Session.create(os.path.join(tmp, "session.db"), pool, measures, "ais", seed=args.seed)
        session.run(lambda b: pool.labels[pool.index_of(b["item"].to_numpy())], budget=args.budget, batch=args.batch)
        print(f"{name}: AIS session, {session.n_labels} labels, {session.n_draws} draws "
              f"({time.perf_counter() - t0:.1f} s)")
        reports = {}
        for model in args.models.split(","):
            rep = R.report_from_session(session, truth=truth, model=model, method=args.method,
                                        num_chains=args.chains, seed=args.seed)
            reports[model] = rep
            st = rep.fit.sample_stats
            div = int(st["diverging"].sum()) if st else None
            print(f"  {model} ({args.method}): {rep.fit.seconds:.1f} s wall, {rep.fit.info['cpu_seconds']:.1f} s CPU, "
                  f"divergences {div}")
        session.close()

    first = next(iter(reports.values()))
    rows = [r.table[r.table["component"] == "f1"] for r in reports.values()]
    import pandas as pd

    f1 = pd.concat(rows, ignore_index=True)
    cols = ["model", "labels", "estimate", "clt_lower", "clt_upper", "clt_width", "post_median", "eq_lower",
            "eq_upper", "eq_width", "hdi_lower", "hdi_upper", "hdi_width", "r_hat", "ess_bulk", "truth"]
    md = [f"F1 on {name} after {first.fit.n_labels} AIS labels (true F1 {truth[0]:.4f}):", "", _md(f1, cols), ""]
    # parameters and diagnostics
    for model, rep in reports.items():
        vn = ["a", "b", "kappa"] if model == "calibrated" else ["theta"]
        summ = rep.summary(var_names=vn + ["G"], coords={"component": ["f1"]}, round_to=3)
        md += [f"`az.summary` ({model}, {rep.fit.method}):", "", "```", summ.to_string(), "```", ""]
        unl = rep.fit.unlabeled_counts[..., 1].sum(-1).ravel()
        true_unl = int(pool.labels.sum() - rep.fit.observed_counts[:, 1].sum())
        md.append(f"{model}: unlabeled positives, posterior median {np.median(unl):.0f} "
                  f"(95%: {np.quantile(unl, 0.025):.0f}–{np.quantile(unl, 0.975):.0f}), truth {true_unl}; "
                  f"PPC: {int(rep.ppc['flag'].sum())} of {len(rep.ppc)} labeled strata flagged, "
                  f"p(χ²) = {rep.ppc.attrs['ppp_chi2']:.2f}")
        md.append("")
    # PR curve: coverage and widths over the thresholds
    for model, rep in reports.items():
        t = rep.table[rep.table["component"] != "f1"]
        live = t["eq_width"] > 0
        md.append(f"PR curve ({model}), {int(live.sum())} non-degenerate components: mean width CLT "
                  f"{t.loc[live, 'clt_width'].mean():.3f} vs Bayes {t.loc[live, 'eq_width'].mean():.3f}; "
                  f"truth inside CLT {t.loc[live, 'clt_covers'].mean():.0%}, Bayes {t.loc[live, 'eq_covers'].mean():.0%}")
    text = "\n".join(md)
    print(text)
    if args.md:
        with open(args.md, "w") as fh:
            fh.write(text + "\n")

    import matplotlib.pyplot as plt

    others = {f"{m}, {r.fit.method}": r.idata for m, r in list(reports.items())[1:]}
    title = (f"F1 on {name} after {first.fit.n_labels} AIS labels: finite-pool posterior vs CLT interval")
    plt.close(first.plot_density("f1", path=os.path.join(args.out, f"posterior_f1_{name}.png"), compare=others,
                                 title=title))
    plt.close(first.plot_pr_band(path=os.path.join(args.out, f"pr_band_{name}.png")))
    for i, (model, rep) in enumerate(reports.items()):
        fn = f"ppc_{name}.png" if i == 0 else f"ppc_{model}_{name}.png"
        plt.close(rep.plot_ppc(path=os.path.join(args.out, fn)))
    print("figures in", os.path.abspath(args.out))


if __name__ == "__main__":
    main()
