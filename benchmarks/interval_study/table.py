"""Print coverage tables from the JSON files written by coverage.sh.

    python benchmarks/interval_study/table.py /tmp/istudy/before [/tmp/istudy/after]
"""
import glob
import json
import os
import sys


def load(d):
    out = {}
    for f in sorted(glob.glob(os.path.join(d, "*.json"))):
        try:
            j = json.load(open(f))
        except Exception:
            continue
        out[os.path.basename(f)[:-5]] = j
    return out


def row(j):
    cells = []
    for c in j["checkpoints"]:
        cov = c.get("coverage")
        rmse = (c.get("mse") or float("nan")) ** 0.5
        w = c.get("mean_width") or float("nan")
        cells.append(f"{cov:.3f} (w/RMSE {w / rmse:.2f})" if cov is not None else "—")
    return cells


dirs = sys.argv[1:]
runs = [load(d) for d in dirs]
keys = sorted(set().union(*[r.keys() for r in runs]))
print("| pool_design | run | cov@500 | cov@1000 | cov@2000 |")
print("|---|---|---|---|---|")
for k in keys:
    for d, r in zip(dirs, runs):
        if k in r:
            print(f"| {k} | {os.path.basename(d)} | " + " | ".join(row(r[k])) + " |")
