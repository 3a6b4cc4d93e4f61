"""Markdown tables of saved ``several_classes.py`` runs: one JSON-lines file per pool in a folder
(``benchmarks/results/several_classes_runs/POOL.jsonl``, what ``several_classes.py POOL --repeats 300
--each-class > FOLDER/POOL.jsonl`` prints; ``POOL_accuracy.jsonl`` for ``--measure accuracy``).

    python benchmarks/interval_study/several_classes_table.py [FOLDER]

Prints the macro-F1 (or accuracy) table -- coverage and mean width of the CLT and Bayesian intervals and
the Bayesian width ÷ the estimate's RMSE at each checkpoint -- and, where the runs have ``--each-class``
lines, each class's F1 / precision / recall coverage at each checkpoint.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ORDER = ["flat3", "probs4", "sharp4", "shift4", "conf4", "shiftconf4", "rare5", "conf5", "probs4_accuracy"]


def read(folder: Path) -> dict:
    out = {}
    for p in sorted(folder.glob("*.jsonl")):
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.startswith("{")]
        if rows:
            out[p.stem] = rows
    return out


def _cells(rows, key, fmt):
    """The rows' ``key`` joined by " / "; "–" where a row has none or it is not finite (a CLT width
    where some run's interval was infinite)."""
    return " / ".join(format(r[key], fmt) if r.get(key) is not None and math.isfinite(r[key]) else "–"
                      for r in rows)


def main(folder: str = "benchmarks/results/several_classes_runs") -> None:
    runs = read(Path(folder))
    names = sorted(runs, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))
    print("| pool | measure | labels | RMSE | CLT coverage | CLT width | Bayesian coverage | Bayesian width "
          "| Bayesian width ÷ RMSE |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        top = [r for r in runs[n] if r["measure"] != "each_class" and "labels" in r]
        if not top:
            continue
        ratio = " / ".join(f"{r['bayes_width'] / r['rmse']:.1f}" for r in top)
        print(f"| {top[0]['pool']} | {top[0]['measure']} | {_cells(top, 'labels', 'd')} | {_cells(top, 'rmse', '.4f')} "
              f"| {_cells(top, 'clt_coverage', '.3f')} | {_cells(top, 'clt_width', '.3f')} "
              f"| {_cells(top, 'bayes_coverage', '.3f')} | {_cells(top, 'bayes_width', '.3f')} | {ratio} |")
    each = {n: [r for r in runs[n] if r["measure"] == "each_class"] for n in names}
    if any(each.values()):
        print()
        print("| pool | class | F1 coverage | precision coverage | recall coverage |")
        print("|---|---|---|---|---|")
        for n in names:
            for c in sorted({r["class"] for r in each[n]}):
                rs = sorted((r for r in each[n] if r["class"] == c), key=lambda r: r["labels"])
                print(f"| {n} | {c} | {_cells(rs, 'f1_coverage', '.3f')} | {_cells(rs, 'precision_coverage', '.3f')} "
                      f"| {_cells(rs, 'recall_coverage', '.3f')} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
