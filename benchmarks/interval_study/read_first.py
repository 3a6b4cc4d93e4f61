"""Which interval a session should read first where the CLT check passes (issue 15, item 4).

    python benchmarks/interval_study/read_first.py benchmarks/results/stages/*.npz [--out benchmarks/results/interval_read_first.md]

Item 4 asks `session status`, the report and the demo to lead with the interval that meets
targets 1 and 3, and the stopping rule to use it.  Until stop 50 a session led with the
confidence sequence wherever the CLT check passed, while `--target-width` stopped on the
Bayesian interval (bayes-stable); since, it stops on the interval it leads with
(``results.stopping(..., "read-first")``).  This script reads the saved per-stage intervals of
``benchmarks/stopping.py --bayes --save-stages`` (every stage's CLT interval, check and
Bayesian interval of each run) and measures, without new runs:

1. at 500 / 1000 / 2000 labels, over the runs whose check passes there: how often the
   confidence sequence and the Bayesian interval hold the truth, and their mean widths;
2. stopping on the interval read first (``read-first``: the confidence sequence where the check
   passes, else bayes-stable) against bayes-stable throughout (the session's rule before stop
   50) and the confidence sequence alone (``clt-cs``, with the check): share stopped, coverage
   at the stop, labels at the stop.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, ".."))
from bayes_eval.results import check_passes, covers, cs_bounds, stopping  # noqa: E402
from stopping_rules import SavedStages  # noqa: E402

WIDTHS = (0.1, 0.05, 0.02)
CHECKPOINTS = (500, 1000, 2000)


def stage_intervals(res):
    """Per run and stage: the confidence sequence, the Bayesian interval (each (runs, stages, m)),
    and whether the CLT check passes (runs, stages)."""
    h = res.history
    m = h.value.shape[2]
    cl, ch = cs_bounds(h.value, h.lower, h.upper, h.n_draws[..., None], sd=h.sd, feasible=h.feasible)
    bl, bh = res.stage_bayes_lower[..., :m], res.stage_bayes_upper[..., :m]
    return (cl, ch), (bl, bh), check_passes(res)


def cell(st):
    return ("never" if not st["stopped_runs"] else
            f"{st['stopped']:.2f}, {st['coverage']:.2f} ({st['stopped_runs']}), {st['mean_labels']:.0f}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=os.path.join(HERE, "..", "results", "interval_read_first.md"))
    a = ap.parse_args(argv)
    names = [os.path.basename(f)[:-4] for f in a.files]
    res_all = [SavedStages(f) for f in a.files]
    lines = ["# The interval read first where the CLT check passes (issue 15, item 4)", "",
             "`python benchmarks/interval_study/read_first.py " + " ".join(a.files) + "`", "",
             "Saved per-stage intervals of `benchmarks/stopping.py --bayes --save-stages` (F1, batches of 50, "
             "runs: " + ", ".join(f"{n} {r.stage_bayes_lower.shape[0]}" for n, r in zip(names, res_all)) + ").", "",
             "## 1. Where the check passes: the confidence sequence against the Bayesian interval", "",
             "Over the runs whose CLT check passes at the checkpoint: share of runs passing, then each interval's "
             "coverage and mean width.", "",
             "| pool | labels | check passes | confidence sequence: coverage (width) | Bayesian: coverage (width) "
             "| width ratio |", "|---|---|---|---|---|---|"]
    for name, res in zip(names, res_all):
        (cl, ch), (bl, bh), passes = stage_intervals(res)
        n_lab = res.history.n_labels[0]
        t = res.true_value[:cl.shape[2]]
        for lab in CHECKPOINTS:
            j = int(np.argmin(np.abs(n_lab - lab)))
            p = passes[:, j]
            if not p.any():
                lines.append(f"| {name} | {int(n_lab[j])} | 0.00 | — | — | — |")
                continue
            cc = np.all(covers(cl[:, j], ch[:, j], t), 1)[p].mean()
            bc = np.all(covers(bl[:, j], bh[:, j], t), 1)[p].mean()
            cw, bw = float(np.mean((ch - cl)[p, j])), float(np.mean((bh - bl)[p, j]))
            lines.append(f"| {name} | {int(n_lab[j])} | {p.mean():.2f} ({int(p.sum())}) | {cc:.3f} ({cw:.4f}) | "
                         f"{bc:.3f} ({bw:.4f}) | {cw / bw:.2f} |")
    lines += ["", "## 2. Stopping on the interval read first", "",
              "Share of runs stopped within the budget, coverage at the stop (runs stopped), labels at the stop. "
              "read-first: at each stage end the interval `session status` reads first -- the confidence sequence "
              "where the CLT check passes, else the Bayesian interval narrow after each of the last 3 stages "
              "(`session status --target-width` since stop 50). bayes-stable: the Bayesian interval throughout "
              "(the session's rule before stop 50, and with `--bayesian`). clt-cs: the confidence sequence "
              "alone, with the check.",
              "", "| pool | rule | " + " | ".join(f"W = {w:g}" for w in WIDTHS) + " |", "|---|---|" + "---|" * len(WIDTHS)]
    for name, res in zip(names, res_all):
        for label, rule in (("**read-first** (the session's rule)", "read-first"),
                            ("bayes-stable (`--bayesian`)", "bayes-stable"), ("clt-cs (with the check)", "clt-cs")):
            fn = (lambda r, w, rule=rule: stopping(r, w, rule))
            lines.append(f"| {name} | {label} | " + " | ".join(cell(fn(res, w)) for w in WIDTHS) + " |")
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
