"""Three systems submitted in turn to an on-demand evaluation (seed 003, issue 17).

    .venv/bin/python examples/ondemand_three_systems.py [WORKDIR] [PROTOCOL]

PROTOCOL: ``post-fill`` (the default), ``post`` or ``joint`` (seed 003's own protocol).

A synthetic universe (20,000 candidates, 1,000 correct) plays the annotators: each round of
tasks written by ``next`` is labeled from the truth and ingested; after the three systems,
120 instances found by exhaustively annotating 120 documents are added.  Prints what each
submission needed and the final table (the worked example of docs/ondemand.md).
"""
import os
import sys
import tempfile

import numpy as np
import pandas as pd

from bayes_eval import ondemand_sim as sim
from bayes_eval.ondemand_cli import print_status
from bayes_eval.ondemand_session import OnDemand

work = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
protocol = sys.argv[2] if len(sys.argv) > 2 else "post-fill"
s = sim.synthetic_setting(3, n_candidates=20_000, n_correct=1_000, seed=3)
ids = np.array([f"x{i}" for i in range(len(s.truth))])
truth = dict(zip(ids, s.truth.astype(int)))
db = os.path.join(work, "eval.db")
if os.path.exists(db):
    os.remove(db)
with OnDemand.create(db, epsilon=0.05, protocol=protocol) as ev:
    for i, name in enumerate(["A", "B", "C"]):
        path = os.path.join(work, f"{name}.csv")
        pd.DataFrame({"item": ids[s.G[:, i]]}).to_csv(path, index=False)
        r = ev.submit_file(name, path)
        print(r["why"])
        rounds = 0
        while True:
            tasks = os.path.join(work, "tasks.csv")
            if not ev.next(tasks)["tasks"]:
                break
            d = pd.read_csv(tasks)
            d["label"] = [truth[x] for x in d["item"]]
            d.to_csv(os.path.join(work, "labels.csv"), index=False)
            ev.ingest(os.path.join(work, "labels.csv"))
            rounds += 1
        row = next(x for x in ev.status()["systems"] if x["name"] == name)
        print(f"  -> {name}: {row['draws']} draws, {row['new_verifications']} new verifications "
              f"(${row['cost']:.2f}) in {rounds} round{'s' if rounds != 1 else ''} of tasks\n")
    found = os.path.join(work, "found.csv")
    pick = np.random.default_rng(0).choice(ids[s.truth], 120, replace=False)
    pd.DataFrame({"item": pick, "unit": [f"doc{k}" for k in range(120)]}).to_csv(found, index=False)
    ev.add_exhaustive(found)
    print_status(ev.status())
t = sim.truth_of(s)
print("\ntrue precision", np.round(t[:3], 3), "recall", np.round(t[3:6], 3), "F1", np.round(t[6:], 3))
