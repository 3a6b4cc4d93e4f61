"""Coverage and width of the Bayesian interval of F1 under several posterior models, on the
same simulated runs (the labeled tables captured by ``capture_labels.py``): the library's
calibrated Beta-binomial, the two monotone models of the issue-15 study
(``monotone_restricted.py``, ``monotone_chain.py``) and the logit-normal departure
(``logit_normal.py``).

    taskset -c 0 python benchmarks/interval_study/monotone_study.py /tmp/mono/abt-buy_ais.npz \
        [--repeats 50] [--models calibrated,restricted,chain]

Prints per checkpoint: the RMSE of the design's estimate, each model's coverage, mean width
and width ÷ RMSE, and the mean posterior expectation of F1.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

import jax.numpy as jnp  # noqa: E402

from bayes_eval import measures as M  # noqa: E402
from bayes_eval.cells import CellTable  # noqa: E402
from bayes_eval.posterior import intervals_at_checkpoints  # noqa: E402
from bayes_eval.results import covers  # noqa: E402
from bayes_eval.models.registry import make_oracle_model  # noqa: E402

sys.path.insert(0, HERE)
import logit_normal  # noqa: E402
import monotone_chain  # noqa: E402
import monotone_restricted  # noqa: E402

STUDY_MODELS = {"restricted": monotone_restricted.monotone_model, "chain": monotone_chain.monotone_model,
                "logit-normal": logit_normal.logit_normal_model}


def cells_of(d):
    x = d["stratum"].shape[0]
    return CellTable(jnp.asarray(d["stratum"]), jnp.asarray(d["size"]), jnp.asarray(d["weight"]),
                     jnp.asarray(d["loss"]), jnp.zeros((x, 2)), jnp.asarray(d["truth"]))


def run(path, models=("calibrated", "restricted"), repeats=None, draws=200, seed=0):
    d = np.load(path)
    cells = cells_of(d)
    lab = d["labeled"] if repeats is None else d["labeled"][:repeats]
    k = d["leaf_probs"].shape[0]
    g = M.get("f1").g
    truth = float(d["true_value"][0])
    val = d["value"][: lab.shape[0], :, 0]
    rmse = np.sqrt(np.mean((val - truth) ** 2, axis=0))
    out = {"pool": os.path.basename(path), "truth": truth, "checkpoints": d["checkpoints"].tolist(), "rmse": rmse.tolist()}
    for name in models:
        model = STUDY_MODELS[name](d["leaf_probs"]) if name in STUDY_MODELS else make_oracle_model(name, d["leaf_probs"])
        t0 = time.perf_counter()
        r = intervals_at_checkpoints(cells, model, g, k, jnp.asarray(lab), seed, draws)
        lo, hi, mean = r["bayes_lower"][..., 0], r["bayes_upper"][..., 0], r["bayes_mean"][..., 0]
        cov = np.mean(covers(lo, hi, truth), axis=0)  # round-off tolerant, as the library's
        width = np.mean(hi - lo, axis=0)
        out[name] = {"coverage": cov.tolist(), "width": width.tolist(), "width_rmse": (width / rmse).tolist(),
                     "mean": np.mean(mean, axis=0).tolist(), "seconds": time.perf_counter() - t0,
                     "miss_low": np.mean(~covers(lo, hi, truth) & (hi < truth), axis=0).tolist(),
                     "miss_high": np.mean(~covers(lo, hi, truth) & (lo > truth), axis=0).tolist()}
    return out


def show(out):
    print(f"{out['pool']}: true F1 {out['truth']:.4f}")
    for i, c in enumerate(out["checkpoints"]):
        row = [f"  @{c}: rmse {out['rmse'][i]:.4f}"]
        for name in out:
            if isinstance(out[name], dict):
                m = out[name]
                row.append(f"{name} cov {m['coverage'][i]:.3f} (lo-miss {m['miss_low'][i]:.3f}) "
                           f"width {m['width'][i]:.4f} = {m['width_rmse'][i]:.1f}x mean {m['mean'][i]:.4f}")
        print(" | ".join(row))
    for name in out:
        if isinstance(out[name], dict):
            print(f"  {name}: {out[name]['seconds']:.1f} s")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("npz", nargs="+")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--models", default="calibrated,restricted")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import json
    res = []
    for p in a.npz:
        o = run(p, tuple(a.models.split(",")), a.repeats)
        show(o)
        res.append(o)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
