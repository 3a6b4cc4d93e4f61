"""The benchmark suite runs end to end (tiny pool, few repeats), so it cannot rot."""
import csv
import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))


@pytest.mark.slow  # 27 s (compiles AIS and the Bayesian intervals): the default tier is at its 10-minute budget
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
    # --merge reruns one design and keeps the other's row (and its curve in the plot data)
    suite.main(["--quick", "--measures", "f1", "--designs", "passive", "--out", str(tmp_path), "--no-speed",
                "--merge"])
    with open(stem.with_suffix(".csv")) as fh:
        assert [r["design"] for r in csv.DictReader(fh)] == ["passive", "ais8"]
    import json

    with open(str(stem) + "_curves.json") as fh:
        assert set(json.load(fh)) == {"passive", "ais8"}


def test_scale_quick(tmp_path):
    """The scale benchmark's session loop runs (one small size, in a subprocess) and
    reports what the issue asks: stage time, peak memory against the pool, strata time."""
    import json

    import scale

    scale.main(["--sizes", "2e4", "--stages", "3", "--out", str(tmp_path)])
    with open(tmp_path / "scale.json") as fh:
        (row,) = json.load(fh)
    assert "error" not in row, row
    assert row["n_items"] == 20_000 and row["stages"] == 3
    for k in ("stage_ms_median", "peak_mb", "pool_mb", "strata_s", "create_s"):
        assert np.isfinite(row[k]) and row[k] > 0, (k, row)
    assert 0.0 < row["estimate_f1"] <= 1.0
    assert (tmp_path / "scale.md").read_text().count("|") > 10
