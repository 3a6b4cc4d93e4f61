"""poisson-adaptive with a larger relative floor on its deviations (``--poisson-option
poisson_eps=E``, default 1e-3): the Poisson counterpart of AIS's audit floor, measured on the
heavy-tie pool and three where nothing starves (``benchmarks/results/audit_floor.md``, "The
Poisson designs on the heavy tie").  The runs, 300 each (about 45 s on one core)::

    for E in 0.001 0.01 0.05; do for P in /tmp/heldout/prob_ties.parquet ../shared/data/abt-buy.parquet \\
        ../shared/data/dblp-acm.parquet /tmp/istudy/p0.01.parquet; do
      bayes-eval simulate $P --design poisson-adaptive --poisson-option poisson_eps=$E --repeats 300 --seed 1 \\
        --bayes no --checkpoints 500,1000,2000 --format json \\
        > benchmarks/results/audit_floor/poisson_eps/eps_$(basename $P .parquet)_$E.json
    done; done
    python benchmarks/interval_study/poisson_eps_table.py

prints one markdown row per run: pool, ε, RMSE, CLT coverage, confidence-sequence coverage,
the CLT check's pass rate and the CLT interval's mean width at 500 / 1000 / 2000 labels.
"""
import glob
import json
import math
import os

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "audit_floor",
                    "poisson_eps")


def main():
    print("| pool | ε | RMSE | CLT cov. | CS cov. | check passed | CLT mean width |")
    print("|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob(os.path.join(HERE, "eps_*.json"))):
        r = json.load(open(f))
        name, eps = os.path.basename(f)[4:-5].rsplit("_", 1)
        cks = r["checkpoints"]

        def fmt(k, d):
            return " / ".join(f"{c[k]:.{d}f}" if c.get(k) is not None else "–" for c in cks)

        rmse = " / ".join(f"{math.sqrt(c['mse']):.4f}" for c in cks)
        print(f"| {name} | {eps} | {rmse} | {fmt('coverage', 2)} | {fmt('coverage_cs', 2)} | "
              f"{fmt('clt_check_passed', 2)} | {fmt('mean_width', 4)} |")


if __name__ == "__main__":
    main()
