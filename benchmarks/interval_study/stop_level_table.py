"""Stopping rules that gate on a stricter Bayesian interval than the one they report, on
the npz of ``stop_level_study.py`` (issue 15, item 3).

    python benchmarks/interval_study/stop_level_table.py /tmp/stoplevel/*.npz \\
        --out benchmarks/results/stopping_level.md
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from bayes_eval.results import covers  # noqa: E402

WIDTHS = (0.1, 0.05, 0.02)


def in_a_row(ok, k):
    run = ok.copy()
    for j in range(1, k):
        run[:, j:] &= ok[:, :-j]
    run[:, :k - 1] = False
    return run


def rule(z, w, gate="95", report="95", k=3, extra=None):
    """Stop at the first stage end where the ``gate`` interval is ≤ w after each of the last
    ``k`` stages (and, with ``extra`` = (level, factor), that interval ≤ factor·w at the
    stop); read coverage on the ``report`` interval at the stop."""
    m = z["value"].shape[2]
    iv = {"95": (z["bayes_lower"][..., :m], z["bayes_upper"][..., :m]),
          "99": (z["bayes_lower_2"][..., :m], z["bayes_upper_2"][..., :m])}
    lo, hi = iv[gate]
    ok = np.all(np.isfinite(hi - lo) & (hi - lo <= w), axis=2)
    narrow = in_a_row(ok, k)
    if extra is not None:
        elo, ehi = iv[extra[0]]
        narrow &= np.all(ehi - elo <= extra[1] * w, axis=2)
    stopped = narrow.any(1)
    first = np.argmax(narrow, 1)
    r = np.arange(len(first))
    rlo, rhi = iv[report]
    cov = np.all(covers(rlo[r, first], rhi[r, first], z["true_value"][:m]), axis=1)
    n = int(stopped.sum())
    if not n:
        return "never"
    lab = z["n_labels"][r, first][stopped].mean()
    width = np.max(rhi[r, first] - rlo[r, first], axis=1)[stopped].mean()
    return f"{stopped.mean():.2f}, {cov[stopped].mean():.2f} ({n}), {lab:.0f}, {width:.3f}"


RULES = [
    ("95% ≤ W, 3 in a row (bayes-stable today); report 95%", dict()),
    ("99% ≤ W, 3 in a row; report 95%", dict(gate="99")),
    ("99% ≤ W, 3 in a row; report 99%", dict(gate="99", report="99")),
    ("99% ≤ W, 2 in a row; report 95%", dict(gate="99", k=2)),
    ("95% ≤ W 3 in a row and 99% ≤ 1.5W; report 95%", dict(extra=("99", 1.5))),
    ("95% ≤ W 3 in a row and 99% ≤ 1.25W; report 95%", dict(extra=("99", 1.25))),
]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    lines = ["| pool | rule | W = 0.1 | W = 0.05 | W = 0.02 |", "|---|---|---|---|---|"]
    fixed = ["| pool | labels | 95% coverage | 95% width | 99% coverage | 99% width |", "|---|---|---|---|---|---|"]
    for f in a.files:
        z = np.load(f)
        name = os.path.basename(f)[:-4]
        for label, kw in RULES:
            lines.append(f"| {name} | {label} | " + " | ".join(rule(z, w, **kw) for w in WIDTHS) + " |")
        m = z["value"].shape[2]
        t = z["true_value"][:m]
        for s in (9, 19, 39):        # stage ends at 500 / 1000 / 2000 labels (batches of 50)
            if s >= z["n_labels"].shape[1]:
                continue
            cells = []
            for lo, hi in ((z["bayes_lower"], z["bayes_upper"]), (z["bayes_lower_2"], z["bayes_upper_2"])):
                c = np.all(covers(lo[:, s, :m], hi[:, s, :m], t), axis=1).mean()
                cells += [f"{c:.2f}", f"{np.max(hi[:, s, :m] - lo[:, s, :m], axis=1).mean():.4f}"]
            fixed.append(f"| {name} | {z['n_labels'][:, s].mean():.0f} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\nAt fixed stages, the same runs:\n\n" + "\n".join(fixed) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
