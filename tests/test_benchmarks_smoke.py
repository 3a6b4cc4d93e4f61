"""The benchmark suite runs end to end (tiny pool, few repeats), so it cannot rot."""
import csv
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))


def test_suite_quick(tmp_path):
    import run as suite

    suite.main(["--quick", "--measures", "f1", "--designs", "passive,ais8", "--out", str(tmp_path), "--no-speed"])
    stem = tmp_path / "suite_f1_synthetic"
    for ext in (".md", ".csv", ".png"):
        assert (stem.with_suffix(ext)).exists()
    with open(stem.with_suffix(".csv")) as fh:
        rows = list(csv.DictReader(fh))
    assert [r["design"] for r in rows] == ["passive", "ais8"]
    mse = {r["design"]: float(r["mse@200"]) for r in rows}
    assert all(np.isfinite(v) and v >= 0 for v in mse.values())
    # the Bayesian interval is computed for the design that carries a model
    assert rows[1]["coverage_bayes@200"] not in ("", None)
    assert "ratio@" in stem.with_suffix(".md").read_text()
