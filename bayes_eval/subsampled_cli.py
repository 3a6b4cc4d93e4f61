"""``bayes-eval subsampled``: measures from data whose negatives / zero-reward rows were
kept at a known rate (seed 004; ``docs/subsampled.md``).

    bayes-eval subsampled FILE --measure auc|f1|precision|recall|accuracy|pr_curve|roc_curve|calibration|policy-value
                          [--keep-rate L|COLUMN | --keep-prob COLUMN] [--format json|text]
                          [--target data|population] [--interval delong|hanley-mcneil|agarwal]
                          [--n-total N] [--bins J] [--thresholds K] [--plan-budget N] [--plot PNG]

Reads CSV or Parquet (columns ``score``, ``pred``, ``label``; for the policy value
``action``, ``propensity``, ``reward``, ``target_action``).  Importing this module is cheap
(no JAX): the estimators load inside :func:`cmd_subsampled`.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from .errors import PoolError, UsageError

MEASURE_CHOICES = ("auc", "f1", "precision", "recall", "accuracy", "pr_curve", "roc_curve", "calibration",
                   "policy-value")


def add_subsampled_parser(subparsers):
    """Register ``subsampled`` on the ``bayes-eval`` parser."""
    p = subparsers.add_parser(
        "subsampled", help="measures from data whose negatives were kept at a known rate (seed 004)",
        description="Estimate a measure from rows whose negatives (zero-reward rows) were kept with a known "
                    "probability, by Horvitz-Thompson reweighting, with intervals (seed 004).")
    p.add_argument("file", metavar="FILE", help="CSV or Parquet rows (score, pred, label; or action, propensity, "
                                                "reward, target_action for --measure policy-value)")
    p.add_argument("--measure", required=True, choices=MEASURE_CHOICES)
    k = p.add_mutually_exclusive_group()
    k.add_argument("--keep-rate", metavar="L", help="negatives (zero-reward rows) were kept with probability L, "
                   "positives always; a number in (0, 1] or a column of per-row L")
    k.add_argument("--keep-prob", metavar="COLUMN", help="column of each row's own inclusion probability in (0, 1] "
                   "(e.g. q of an exported session sample)")
    for role in ROLES:
        p.add_argument(f"--{role.replace('_', '-')}-column", metavar="NAME", default=None,
                       help=f"the file's column holding {ROLES[role]}, when it is not named '{role}'")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--target", choices=("data", "population"), default=None,
                   help="truth = the full data before subsampling (default) or the population it was drawn from "
                        "(not for calibration or policy-value)")
    p.add_argument("--interval", choices=("delong", "hanley-mcneil", "agarwal"), default=None,
                   help="AUC: DeLong CLT interval (default), Hanley-McNeil CLT interval, or Agarwal et al.'s "
                        "distribution-free bound")
    p.add_argument("--level", type=float, default=0.95)
    p.add_argument("--n-total", type=float, default=None, metavar="N",
                   help="rows before subsampling, when known: the unbiased HT form instead of the ratio form "
                        "(not for auc or calibration)")
    p.add_argument("--bins", type=int, default=None, metavar="J", help="calibration: equal-count bins (default 10)")
    p.add_argument("--thresholds", type=int, default=None, metavar="K",
                   help="pr_curve, roc_curve: thresholds (default 50)")
    p.add_argument("--plan-budget", type=int, default=None, metavar="N",
                   help="AUC: the planning table for a budget of N rows (positive share, negatives to keep, widths)")
    p.add_argument("--plot", metavar="PNG", default=None,
                   help="calibration: write the reliability diagram; auc with --plan-budget: the planning curve")
    return p


#: the columns the measures read (``subsampled_frame.COLUMNS``) and what each holds, for
#: ``--score-column NAME`` and the like (the names ``session new`` uses for the first three)
ROLES = {"score": "the classifier's scores", "pred": "the predicted labels", "label": "the ground truth",
         "action": "the logged actions", "propensity": "the logging policy's propensities",
         "reward": "the rewards", "target_action": "the target policy's actions"}


def _named_columns(frame, args):
    """The frame with the columns named by ``--score-column`` and the like under the names the
    measures read; a missing column is refused naming the flag that would name it.  Unlike the
    other flags, a column flag the measure does not read is accepted (a script evaluating several
    measures of one file passes the same names to each; a named score is still checked for NaN)."""
    from .subsampled_frame import COLUMNS

    given = {role: getattr(args, f"{role}_column") for role in ROLES if getattr(args, f"{role}_column")}
    for role, name in given.items():
        if name not in frame.columns:
            raise PoolError(f"--{role.replace('_', '-')}-column {name!r}: the data have no such column "
                            f"(columns: {', '.join(map(str, frame.columns))})")
    if len(set(given.values())) < len(given):
        raise UsageError("one column given to two of " + " / ".join(f"--{r.replace('_', '-')}-column" for r in given))
    # a standard-named column another one replaces is dropped, unless it is itself named for a role
    renamed = frame.drop(columns=[r for r in given if r in frame.columns and r not in given.values()])
    renamed = renamed.rename(columns={name: role for role, name in given.items()})
    for role in COLUMNS[args.measure]:
        if role not in renamed.columns:
            raise PoolError(f"the data have no column {role!r} (columns: {', '.join(map(str, frame.columns))}); "
                            f"--{role.replace('_', '-')}-column NAME names the column holding {ROLES[role]}")
    return renamed


def _read(path):
    from .tables import read_table

    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    frame, _, _ = read_table(path, what="data file")
    if len(frame) == 0:
        raise PoolError(f"{path}: no rows (columns: {', '.join(map(str, frame.columns)) or 'none'})")
    return frame


def _check(args):
    if not 0 < args.level < 1:
        raise UsageError(f"--level must be in (0, 1), got {args.level!r}")
    if args.bins is not None and args.bins < 1:
        raise UsageError(f"--bins must be at least 1, got {args.bins}")
    if args.thresholds is not None and args.thresholds < 1:
        raise UsageError(f"--thresholds must be at least 1, got {args.thresholds}")
    if args.plan_budget is not None and args.measure != "auc":
        raise UsageError("--plan-budget is for --measure auc")
    # a flag the measure does not read is refused, not ignored: the user meant something by it
    unread = {"--target": (args.target, ("calibration", "policy-value")),
              "--interval": (args.interval, tuple(m for m in MEASURE_CHOICES if m != "auc")),
              "--n-total": (args.n_total, ("auc", "calibration")),
              "--bins": (args.bins, tuple(m for m in MEASURE_CHOICES if m != "calibration")),
              "--thresholds": (args.thresholds, tuple(m for m in MEASURE_CHOICES if m not in ("pr_curve", "roc_curve")))}
    for flag, (value, measures) in unread.items():
        if value is not None and args.measure in measures:
            raise UsageError(f"{flag} does not apply to --measure {args.measure} "
                             f"(it is for {', '.join(m for m in MEASURE_CHOICES if m not in measures)})")
    args.target = args.target or "data"
    args.interval = args.interval or "delong"
    args.bins = 10 if args.bins is None else args.bins
    args.thresholds = 50 if args.thresholds is None else args.thresholds
    if args.measure != "policy-value" and args.keep_rate is None and args.keep_prob is None:
        raise UsageError("say how the rows were thinned: --keep-rate L (negatives kept with probability L) or "
                         "--keep-prob COLUMN (per-row inclusion probabilities); --keep-rate 1 if nothing was")


def cmd_subsampled(args) -> int:
    """Run ``bayes-eval subsampled``; returns the exit status."""
    _check(args)
    frame = _named_columns(_read(args.file), args)
    if args.measure == "policy-value" and args.keep_rate is None and args.keep_prob is None:
        # the other measures refuse to guess; a log that was not thinned is common for this one
        print("bayes-eval: policy-value without --keep-rate / --keep-prob: every row is read as kept (a log not "
              "thinned); if zero-reward rows were thinned, say --keep-rate L", file=sys.stderr)
    from . import subsampled_frame as F
    from .subsampled import as_json
    from .subsampled_auc import plan

    est = F.estimate(frame, args.measure, keep_rate=args.keep_rate, keep_prob=args.keep_prob, target=args.target,
                     interval=args.interval, n_total=args.n_total, bins=args.bins, n_thresholds=args.thresholds,
                     level=args.level)
    out = est.as_dict()
    pl = None
    if args.plan_budget is not None:
        ex = est.extra
        pl = plan(args.plan_budget, n_pos_available=ex["n_pos"], n_neg_available=int(round(est.effective_n - ex["n_pos"])),
                  auc_guess=float(est.estimate[0]), level=args.level)
        out["plan"] = as_json(pl)
    if args.plot:
        if args.measure == "calibration":
            plot_reliability(est, args.plot)
        elif pl is not None:
            plot_plan([pl], args.plot)
        else:
            raise UsageError("--plot draws the reliability diagram (--measure calibration) or the AUC planning "
                             "curve (--measure auc --plan-budget N)")
        out["plot"] = os.path.abspath(args.plot)
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(_text(out, pl))
        if args.plot:
            print(f"wrote {args.plot}")
    return 0


def _fmt(v):
    return "nan" if v is None else f"{v:.6g}"


def _text(d, pl) -> str:
    lines = [f"{d['measure']}  ({d['n_rows']:,} rows, effective size η = {d['effective_n']:,.1f})"]
    est, (lo, hi) = d["estimate"], d["interval"]
    if isinstance(est, list):
        lines.append(f"{'component':>24} {'estimate':>10}  interval ({d['interval_kind']})")
        for n, e, a, b in zip(d["names"], est, lo, hi):
            lines.append(f"{n:>24} {_fmt(e):>10}  [{_fmt(a)}, {_fmt(b)}]")
    else:
        lines.append(f"estimate {_fmt(est)}   interval [{_fmt(lo)}, {_fmt(hi)}]   ({d['interval_kind']})")
    if d.get("clt_ok") is False:
        # the record's own flag (subsampled.informative_rows, subsampled_auc): say it where the interval is read
        from .subsampled import MIN_INFORMATIVE
        from .subsampled_auc import MIN_DISCORDANT

        if "n_discordant_neg" in d:
            few = [f"{d['n_pos']} positive(s)"] if d.get("n_pos", MIN_DISCORDANT) < MIN_DISCORDANT else []
            few += [f"{d['n_neg']} negative(s)"] if d.get("n_neg", MIN_DISCORDANT) < MIN_DISCORDANT else []
            few += ([f"{d['n_discordant_neg']} kept negative(s) ranked above some positive (they carry its variance)"]
                    if d["n_discordant_neg"] < MIN_DISCORDANT else [])
            why = (f"only {' and '.join(few or [str(d['n_discordant_neg']) + ' kept negative(s) ranked above some positive'])}; "
                   f"it needs at least {MIN_DISCORDANT} positives, {MIN_DISCORDANT} negatives and {MIN_DISCORDANT} "
                   f"negatives ranked above some positive")
        elif not d.get("n_informative"):
            why = None
            point = bool(np.all(np.asarray(lo, float) == np.asarray(hi, float)))
            where = "(README, \"Where the CLT does not apply\"; clt_ok: false in --format json)."
            if point and abs(d["effective_n"] - d["n_rows"]) < 1e-9 * max(d["n_rows"], 1):
                lines.append("note: nothing was thinned (every keep rate is 1): these rows are the full data and the "
                             "value is theirs exactly")
            elif point:
                lines.append("note: no kept thinned row carries the design variance, so the interval is a point. Either "
                             "the measure does not depend on the thinned rows (then it is exact: e.g. recall when "
                             "only negatives are thinned), or the kept rows hold none of the pattern it depends on "
                             "(e.g. the false positives of F1 or precision), which does not rule out up to ~3 / keep "
                             "rate such rows in the full data " + where)
            else:
                lines.append("note: no kept thinned row carries the design variance: the interval is its population "
                             "part alone. Where the measure depends on the thinned rows (e.g. the false positives of "
                             "F1 or precision), up to ~3 / keep rate such rows may exist that none of the kept ones "
                             "shows " + where)
        else:
            why = (f"only {d['n_informative']} kept thinned row(s) carry its variance (it needs {MIN_INFORMATIVE})")
        if why is not None and str(d.get("interval_kind", "")).startswith("bound"):
            lines.append(f"note: the CLT would not apply here — {why}; the bound shown does not rest on it")
        elif why is not None:
            lines.append(f"warning: the CLT does not apply — {why}. The interval is not a reliable "
                         f"{int(round(100 * d.get('level', 0.95)))}% interval (README, \"Where the CLT does not "
                         f"apply\"; clt_ok: false in --format json).")
    if d["measure"] == "calibration":
        lines.append(f"{'bin':>4} {'mean score':>11} {'mean label':>11}  interval of the mean label   share")
        for j, (p, r, a, b, m) in enumerate(zip(d["phi"], d["r"], d["r_lo"], d["r_hi"], d["mass"])):
            lines.append(f"{j:>4} {_fmt(p):>11} {_fmt(r):>11}  [{_fmt(a)}, {_fmt(b)}]   {_fmt(m)}")
    if d["measure"] == "policy-value" and "estimate_ht" in d:
        lines.append(f"η form {_fmt(d['estimate_eta'])} (variance {_fmt(d['var_eta'])}); HT form is the estimate")
    if pl is not None:
        t = pl["table"]
        lines.append(f"\nAUC planning for a budget of {pl['budget']:,} rows (δ = {pl['delta']:g})")
        lines.append(f"{'rho':>7} {'positives':>9} {'negatives':>9} {'neg keep rate':>13} {'bound width':>11} "
                     f"{'CLT width':>9}")
        for i in range(len(t["rho"])):
            if not t["feasible"][i]:
                continue
            lines.append(f"{t['rho'][i]:>7.4f} {t['n_pos'][i]:>9} {t['n_neg_keep'][i]:>9} "
                         f"{t['neg_keep_rate'][i]:>13.4g} {t['bound_width'][i]:>11.4f} {t['clt_width'][i]:>9.4f}")
        b = pl["best"]
        lines.append(f"best: rho = {b['rho']:.3f} ({b['n_pos']} positives, keep {b['n_neg_keep']} negatives, "
                     f"keep rate {b['neg_keep_rate']:.4g}): bound width {b['bound_width']:.4f}, "
                     f"CLT width {b['clt_width']:.4f}")
    return "\n".join(lines)


def plot_reliability(est, path: str) -> str:
    """The reliability diagram of a :func:`bayes_eval.subsampled_calibration.calibration`
    record: control points with their intervals, the spline ψ, the diagonal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ex = est.extra
    fig, ax = plt.subplots(figsize=(5, 5))
    lo = min(ex["knots_x"].min(), ex["knots_y"].min())
    hi = max(ex["knots_x"].max(), ex["knots_y"].max())
    ax.plot([lo, hi], [lo, hi], color="0.7", lw=1, label="perfect calibration")
    ax.plot(ex["knots_x"], ex["knots_y"], color="C0", lw=1, label="spline ψ (004 §Regression)")
    yerr = np.vstack([ex["r"] - ex["r_lo"], ex["r_hi"] - ex["r"]])
    ax.errorbar(ex["phi"], ex["r"], yerr=np.clip(yerr, 0, None), fmt="o", color="C1", capsize=3,
                label="control points, 95% CLT")
    ax.set_xlabel("mean score in bin (weighted)")
    ax.set_ylabel("mean label in bin (weighted)")
    lo_e, hi_e = est.interval[0][0], est.interval[1][0]
    ax.set_title(f"reliability, ECE {est.estimate[0]:.4f} [{lo_e:.4f}, {hi_e:.4f}]", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_plan(plans, path: str, labels=None) -> str:
    """The AUC planning curve(s): the bound's width 2ε and the Hanley–McNeil CLT width
    against the positive share ρ for each budget, the best feasible ρ marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, pl in enumerate(plans):
        t = pl["table"]
        f = np.asarray(t["feasible"], bool)
        lab = labels[i] if labels else f"N = {pl['budget']:,}"
        ax.plot(t["rho"][f], t["bound_width"][f], color=f"C{i}", marker=".", label=f"{lab}: Agarwal bound 2ε (δ={pl['delta']:g})")
        if "clt_width" in t:
            ax.plot(t["rho"][f], t["clt_width"][f], color=f"C{i}", ls="--", marker=".", label=f"{lab}: Hanley–McNeil 95% width")
        ax.axvline(pl["best"]["rho"], color=f"C{i}", ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_xlabel("positive share ρ of the N kept rows")
    ax.set_ylabel("interval width")
    ax.set_title("AUC planning (004 §AUC): width against positive share", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
