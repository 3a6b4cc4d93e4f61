"""The examples the README points to run as shown and print what they claim (those the other
test files do not run: labeling_loop.py is run in test_session.py, subsampled_*.py in
test_subsampled.py)."""
from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")


def _main(name):
    return runpy.run_path(os.path.join(EXAMPLES, name), run_name="not_main")["main"]


def test_ondemand_example_evaluates_three_systems(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, "ondemand_three_systems.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for name in ("A", "B", "C"):
        assert re.search(rf"^{name}\s+\d+\s+\d+\s+[\d.]+\s+0\.\d+ ± 0\.\d+", r.stdout, re.M), r.stdout[-2000:]
    assert "paired differences" in r.stdout and "true precision" in r.stdout


@pytest.mark.slow
def test_compare_designs_ranks_ais_above_passive(capsys):
    _main("compare_designs.py")(["--repeats", "20", "--budget", "500"])
    out = capsys.readouterr().out
    assert "true F1 = 0.7895" in out
    mse = {d: float(m) for d, m in re.findall(r"^\s*(\w+)  @500: mse=([\d.e+-]+)", out, re.M)}
    assert set(mse) == {"passive", "is", "oasis", "ais"}
    assert mse["ais"] < mse["passive"] / 10        # 100 repeats: 2.7e-3 against 2.1e-1


@pytest.mark.slow
def test_bayes_vs_clt_writes_its_tables_and_figures(tmp_path, capsys):
    md = tmp_path / "tables.md"
    _main("bayes_vs_clt.py")(["--budget", "300", "--chains", "1", "--models", "calibrated", "--out",
                              str(tmp_path), "--md", str(md)])
    out = capsys.readouterr().out
    assert "| calibrated | 300 |" in out and "PPC:" in out
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert any(p.startswith("posterior_f1_") for p in pngs) and any(p.startswith("pr_band_") for p in pngs), pngs
    assert "| calibrated | 300 |" in md.read_text()
