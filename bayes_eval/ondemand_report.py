"""``bayes-eval ondemand report``: CSV + PNG of an on-demand evaluation (seed 003).

Files: ``estimates.csv`` (per system and measure: the joint, post-stratified and simple
estimates with 95% intervals; column ``headline`` marks the session protocol's estimator;
``skipped_draws`` the system's draws of instances nobody can verify, ``ondemand skip``),
``pairs.csv`` (paired differences, the headline estimator), ``estimates.png`` (intervals per
system, the headline estimator vs simple), ``cost.png`` (cumulative verification cost against
systems submitted: the protocol as run, and the simple estimator's z²/(4ε²) fresh draws per
system, expected distinct instances).
"""
from __future__ import annotations

import os

import numpy as np

from . import ondemand as od
from .errors import SessionError

__all__ = ["write_report"]


def write_report(ev, out_dir) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    out_dir = os.fspath(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise SessionError(f"cannot create folder {out_dir}: {exc.strerror}") from None
    st = ev.status()
    head = st.get("estimator", "joint")
    rows = []
    for r in st["systems"]:
        for m in ("precision", "recall", "f1"):
            for kind in ("joint", "post", "simple"):
                iv = r.get(m, {}).get(kind) if isinstance(r.get(m), dict) else None
                rows.append({"system": r["name"], "measure": m, "estimator": kind, "headline": kind == head,
                             "estimate": iv and iv["estimate"], "lo": iv and iv["lo"], "hi": iv and iv["hi"],
                             "draws": r["draws"], "skipped_draws": r.get("skipped_draws", 0),
                             "new_verifications": r["new_verifications"], "cost": r["cost"]})
    files = [os.path.join(out_dir, "estimates.csv"), os.path.join(out_dir, "pairs.csv"),
             os.path.join(out_dir, "estimates.png"), os.path.join(out_dir, "cost.png")]
    pd.DataFrame(rows).to_csv(files[0], index=False)
    pd.DataFrame([{"a": p["a"], "b": p["b"], **{f"{m}_{k}": (p[m] or {}).get(k) for m in ("precision", "recall", "f1")
                                                for k in ("estimate", "lo", "hi")}} for p in st["pairs"]]
                 ).to_csv(files[1], index=False)
    names = [r["name"] for r in st["systems"]]
    fig, axes = plt.subplots(1, 3, figsize=(12, 0.5 * len(names) + 2), sharey=True)
    labeled = set()   # each estimator named once in the legend, at its first interval drawn
    for ax, m in zip(axes, ("precision", "recall", "f1")):
        drawn = 0
        for off, kind, color in ((-0.15, head, "C0"), (0.15, "simple", "C1")):
            for y, r in enumerate(st["systems"]):
                iv = r.get(m, {}).get(kind) if isinstance(r.get(m), dict) else None
                if iv:
                    ax.errorbar(iv["estimate"], y + off, xerr=iv["half_width"], fmt="o", color=color,
                                label=None if kind in labeled else kind, capsize=3)
                    labeled.add(kind)
                    drawn += 1
        if not drawn:   # say why the panel is empty rather than leave blank axes
            why = ("recall needs an exhaustive sample (ondemand add-exhaustive)" if m != "precision"
                   else "no round of draws fully verified yet")
            ax.text(0.5, 0.5, f"no estimate:\n{why}", ha="center", va="center", fontsize=8, color="0.4",
                    transform=ax.transAxes, wrap=True)
        ax.set_title(m)
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
    axes[0].set_yticks(range(len(names)), names)
    axes[0].invert_yaxis()
    if labeled:
        fig.legend(loc="upper right", fontsize=8)
    fig.suptitle(f"on-demand evaluation: 95% intervals (ε = {st['config']['epsilon']})")
    fig.tight_layout()
    fig.savefig(files[2], dpi=110)
    plt.close(fig)
    eps = st["config"]["epsilon"]
    n_simple = int(np.ceil(od.Z95 ** 2 / (4 * eps ** 2)))
    simple = [r["items"] * (1 - (1 - 1 / r["items"]) ** n_simple) * st["config"]["cost_verify"]
              for r in st["systems"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.arange(1, len(names) + 1)
    ax.plot(x, np.cumsum([r["cost"] for r in st["systems"]]), "o-",
            label=f"{st['config'].get('protocol', 'joint')} protocol (as run)")
    ax.plot(x, np.cumsum(simple), "s--", label=f"simple ({n_simple} fresh draws per system, expected)")
    ax.set_xticks(x, names)
    ax.set_xlabel("systems submitted")
    ax.set_ylabel("verification cost ($)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(files[3], dpi=110)
    plt.close(fig)
    return files
