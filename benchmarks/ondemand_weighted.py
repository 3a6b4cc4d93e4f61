"""Issue 15 (stop 80): on-demand sessions with weighted systems (a ``weight`` column).

    python benchmarks/ondemand_weighted.py PROTOCOL REPEATS [--weights all|B|none]

Scripted :class:`bayes_eval.ondemand_session.OnDemand` sessions (not the simulation: the
session's own sizing, rounds and top-ups) on three systems of the synthetic universe of
``examples/ondemand_three_systems.py`` (20,000 candidates, 1,000 correct, a new universe per
repeat), ε = 0.05; the systems named by ``--weights`` get weights uniform in [0.5, 1.5].
Annotators answer from the truth.  Prints the mean verifications bought, the coverage of each
system's headline precision interval of its true weighted precision Σ pᵢ f, and the mean
half-width (README, "Weighted systems").
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from bayes_eval import ondemand_sim as sim  # noqa: E402
from bayes_eval.ondemand_session import OnDemand  # noqa: E402


def one_session(work, protocol, rep, weights):
    s = sim.synthetic_setting(3, n_candidates=20_000, n_correct=1_000, seed=100 + rep)
    ids = np.array([f"x{i}" for i in range(len(s.truth))])
    truth = dict(zip(ids, s.truth.astype(int)))
    rng = np.random.default_rng(rep)
    db = os.path.join(work, f"eval{rep}.db")
    true = []
    with OnDemand.create(db, epsilon=0.05, protocol=protocol, seed=rep) as ev:
        for i, name in enumerate("ABC"):
            its = ids[s.G[:, i]]
            weighted = weights == "all" or weights == name
            w = rng.uniform(0.5, 1.5, len(its)) if weighted else np.ones(len(its))
            true.append((w * s.truth[s.G[:, i]]).sum() / w.sum())
            path = os.path.join(work, f"{name}.csv")
            pd.DataFrame({"item": its, "weight": w}).to_csv(path, index=False)
            ev.submit_file(name, path)
            while True:
                r = ev.next()
                if not r["tasks"]:
                    break
                ev.add_labels(r["items"], [truth[x] for x in r["items"]])
        st = ev.status()
    os.remove(db)
    h = st["estimator"]
    rows = [r["precision"][h] for r in st["systems"]]
    return (st["labels"]["verifications"], [abs(r["estimate"] - t) <= r["half_width"] for r, t in zip(rows, true)],
            [r["half_width"] for r in rows], h)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("protocol", choices=("post-fill", "post", "joint"))
    ap.add_argument("repeats", type=int)
    ap.add_argument("--weights", default="all", help="all, none, or one system's name (A, B or C)")
    a = ap.parse_args(argv)
    t0 = time.time()
    work = tempfile.mkdtemp()
    out = [one_session(work, a.protocol, r, a.weights) for r in range(a.repeats)]
    cost = np.array([o[0] for o in out], dtype=float)
    cover = np.array([o[1] for o in out], dtype=float).mean(0)
    hw = np.array([o[2] for o in out]).mean(0)
    print(f"{a.protocol}, weights {a.weights}, {a.repeats} sessions, headline {sorted({o[3] for o in out})}: "
          f"verifications {cost.mean():.0f}, coverage {np.round(cover, 2)}, mean half-width {np.round(hw, 3)} "
          f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
