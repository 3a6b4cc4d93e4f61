"""What ``bayes-eval simulate`` says about a curve and about a design that ran out of items
(stop 82's new-user walk): a PR curve's coverage per component in the JSON (the averages pool
them), its text table averaged over the components defined (it printed nan), and a stall that is
every item the measure counts labeled said as such (it read as a proposal with no mass left)."""
import json

import numpy as np
import pandas as pd
import pytest

from bayes_eval.cli import main as cli_main


@pytest.fixture(autouse=True)
def _no_compile_cache(monkeypatch):
    monkeypatch.setenv("BAYES_EVAL_CACHE_DIR", "")


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory):
    rng = np.random.default_rng(1)
    n = 1500
    y = (rng.random(n) < 0.06).astype(int)
    s = np.where(y == 1, rng.normal(1.0, 1.2, n), rng.normal(-2.5, 1.0, n))
    f = tmp_path_factory.mktemp("pool") / "pool.csv"
    pd.DataFrame({"item": np.arange(n), "score": s, "pred": (s >= 0).astype(int), "label": y}).to_csv(f, index=False)
    return str(f)


def _cli(capsys, *argv):
    rc = cli_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_curves_coverage_per_component(capsys, pool_file):
    args = ["simulate", pool_file, "--measure", "pr_curve", "--thresholds", "3", "--design", "passive",
            "--budget", "100", "--checkpoints", "100", "--repeats", "6", "--bayes", "no", "--strata", "8"]
    rc, out, err = _cli(capsys, *args, "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    c = d["checkpoints"][0]
    per = c["coverage_by_component"]
    assert len(per) == len(d["components"]) == 6 and len(c["coverage_cs_by_component"]) == 6
    defined = [v for v in per if v is not None]
    assert defined and all(0.0 <= v <= 1.0 for v in defined)
    # the pooled coverage is the per-component ones weighted by their defined runs: within their range
    assert min(defined) - 1e-12 <= c["coverage"] <= max(defined) + 1e-12
    rc, out, err = _cli(capsys, *args)
    row = next(line for line in out.splitlines() if line.strip().startswith("100 "))
    assert rc == 0 and "nan" not in row and "a measure of 6 components" in out, out


def test_a_stall_that_is_every_item_labeled_says_so(capsys, pool_file):
    """Precision counts the predicted positives only: once each is labeled the design has no
    item left to draw, and the estimate is exact."""
    pos = int((pd.read_csv(pool_file)["pred"] == 1).sum())
    rc, out, err = _cli(capsys, "simulate", pool_file, "--measure", "precision", "--design", "ais", "--budget",
                        str(pos + 60), "--checkpoints", str(pos + 60), "--repeats", "2", "--bayes", "no", "--strata", "8")
    assert rc == 0, err
    assert f"every item precision counts is labeled: {pos:,} have a non-zero loss" in out, out
    assert "puts almost no mass" not in out
