"""Markdown table of ``stochastic_oracle.sh``'s JSON: per pool and checkpoint the design's estimate's
RMSE (and the posterior mean's, "post. RMSE"), and each interval's coverage and mean width ÷ the
estimate's RMSE (Bayesian, CLT, confidence sequence).

    python benchmarks/interval_study/stochastic_table.py /tmp/istudy/stochastic [DESIGN]
"""
import json
import math
import sys
from pathlib import Path

ORDER = ["p0.5", "p0.1", "p0.01", "demo", "abt-buy", "dblp-acm", "dip", "staircase10"]


def main(folder: str, design: str = "ais") -> None:
    files = {p.stem.rsplit("_", 1)[0]: p for p in Path(folder).glob(f"*_{design}.json") if p.stat().st_size}
    print(f"| pool ({design}, stochastic oracle) | labels | RMSE | post. RMSE | Bayesian cov. | ÷ RMSE | CLT cov. | ÷ RMSE "
          f"| CS cov. | ÷ RMSE | runs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in sorted(files, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        d = json.loads(files[name].read_text())
        for c in d["checkpoints"]:
            rmse = math.sqrt(c["mse"])
            row = [name, c["labels"], f"{rmse:.4f}",
                   f"{math.sqrt(c['mse_bayes']):.4f}" if c.get("mse_bayes") is not None else "—"]
            for cov, wid in (("coverage_bayes", "mean_width_bayes"), ("coverage", "mean_width"),
                             ("coverage_cs", "mean_width_cs")):
                row += ([f"{c[cov]:.3f}", f"{c[wid] / rmse:.1f}"] if cov in c and c[cov] is not None
                        else ["—", "—"])
            row.append(d["repeats"])
            print("| " + " | ".join(str(x) for x in row) + " |")


if __name__ == "__main__":
    main(*sys.argv[1:])
