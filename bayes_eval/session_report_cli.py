"""``bayes-eval session report``: the report folder of a labeling session (tables, plots,
``report.md``), split from :mod:`bayes_eval.session_cli`, whose parser and dispatch call
:func:`cmd_report`.  Importing this module is cheap (no JAX).
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from .results import BAYES_STOP_INTERVALS, blind_spot_text
from .results import collapsed_text as _collapsed_note
from .session_cli_text import (allowed_line, clt_check_line, few_labels_line, fmt, open_session, outside_note,
                               posterior_reads, print_json, stopping_line, unreached_line)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["cmd_report", "label_tables"]

def _pr_caveat(s, bayes_band: bool = False) -> str | None:
    """The PR curve's caveat in ``session report``: where the session's CLT check fails for its
    first measure, the curve's CLT band rests on the positives found (None where it passes or
    the design has no check); ``bayes_band``: the figure has the Bayesian band, the one to read."""
    from .estimators import MODEL_CHECK_MAX

    chk = list(s.clt_check())[: len(s.measures[0].names)]
    if not any(float(c) > MODEL_CHECK_MAX for c in chk):  # NaN (no check) compares False
        return None
    if bayes_band:
        return "CLT check fails: the CLT band rests on the positives found; read the Bayesian band"
    return "CLT check fails: the band rests on the positives found"


def _md_table(df, floatfmt="{:.4g}"):
    cols = list(df.columns)

    def cell(v):
        if isinstance(v, float):
            return "" if not math.isfinite(v) else floatfmt.format(v)
        return str(v)

    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def _pr_curve_table(s, thresholds, level, bayesian=True):
    """The PR curve of the report: the session's own pr_curve measure if it has one,
    else one estimated from the same labels on ``thresholds`` evenly spaced scores; with
    ``bayesian``, where the session has a posterior, the Bayesian band too (columns
    ``precision_bayes_median``, ``precision_bayes_lower`` ...: the finite-pool posterior of
    the curve given the same labels, :meth:`~bayes_eval.session.Session.posterior_of`)."""
    import numpy as np
    import pandas as pd

    from . import measures as M
    from .estimators import normal_interval
    from .feasible import cut
    from .posterior import equal_tailed
    from .session import SessionError

    pr = next((m for m in s.measures if m.name.startswith("pr_curve")), None)
    blo = bhi = bmed = None
    if pr is not None:
        names = list(pr.names)
        iv = s.intervals(level, bayesian=False).set_index("component")
        value = iv.loc[names, "estimate"].to_numpy()
        lo = iv.loc[names, "lower"].to_numpy()
        hi = iv.loc[names, "upper"].to_numpy()
        b = s.bayesian_interval(level) if bayesian else None
        if b is not None:
            b = b.set_index("component")
            blo, bhi = b.loc[names, "lower"].to_numpy(), b.loc[names, "upper"].to_numpy()
            bmed = b.loc[names, "estimate"].to_numpy()   # the posterior median
    else:
        system = int(s.config.get("system", 0))
        # evenly spaced between the smallest and largest score, as in 001 §5.3 (quantiles of an
        # imbalanced pool would crowd the thresholds among the negatives)
        t = M.default_thresholds(np.asarray(s.pool.scores[:, system]), thresholds, spacing="uniform")
        pr = M.pr_curve(t, system=system)
        names = list(pr.names)
        draws = s.posterior_of(pr) if bayesian else None
        try:
            est = s.estimate_draws(pr)
            lo, hi = (np.asarray(a) for a in normal_interval(est.value, est.cov, level))
            # sample reuse (001 §3.3.1): where the design never draws items this curve counts (AIS
            # below the session's threshold) the weighted estimate leaves them out -- no estimate
            # there; elsewhere projected onto what the labels allow, the band cut to it
            reuse = s.reuse_of(pr)
            feas = reuse["feasible"]
            value = np.clip(np.asarray(est.value), feas[0], feas[1])
            lo, hi = cut(lo, hi, feas)
            value, lo, hi = (np.where(reuse["covered"], a, np.nan) for a in (value, lo, hi))
            if draws is None and not reuse["covered"].any():
                raise SessionError("the design's draws do not reach the items this PR curve counts "
                                   "(create the session with --measure pr_curve, or read the Bayesian band)")
        except SessionError:
            # the Poisson designs estimate their own measures from the round records only: a
            # further measure's curve is the posterior's alone (no posterior: the error stands)
            if draws is None:
                raise
            value = lo = hi = np.full(len(names), np.nan)
        if draws is not None:
            with np.errstate(all="ignore"):
                blo, bhi = (np.asarray(a) for a in equal_tailed(draws, level))
                bmed = np.nanmedian(draws, axis=0)
    L = len(names) // 2
    df = pd.DataFrame({"threshold": [n.split("@", 1)[1] for n in names[:L]], "precision": value[:L],
                       "precision_lower": lo[:L], "precision_upper": hi[:L], "recall": value[L:],
                       "recall_lower": lo[L:], "recall_upper": hi[L:]})
    if blo is not None:
        df["precision_bayes_median"], df["precision_bayes_lower"], df["precision_bayes_upper"] = bmed[:L], blo[:L], bhi[:L]
        df["recall_bayes_median"], df["recall_bayes_lower"], df["recall_bayes_upper"] = bmed[L:], blo[L:], bhi[L:]
    return df


def _check_folder(path):
    """The report's folder exists or can be created, and can be written."""
    from .errors import UsageError

    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"--out {path}: a file of that name exists (the report needs a folder)")
    up = os.path.abspath(path)
    while not os.path.exists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up) or not os.access(up, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path}: cannot write there (permission denied in {up})")


def _read_first(lead_bayes: bool, st: dict, has_bayes: bool, stop: dict | None) -> str:
    """The report's sentence naming the interval to read first (``session status``'s headline):
    the Bayesian one where it leads, the confidence sequence where the CLT check passes, else none."""
    if lead_bayes:
        failed = any(c.get("clt_reliable") is False for c in st["estimates"])
        return ("**Read first: the Bayesian interval** (`bayes_lower`, `bayes_upper`: "
                + posterior_reads(st.get("oracle", "deterministic"))
                + ("; the stopping rule reads it, below" if stop and stop.get("kind") in BAYES_STOP_INTERVALS
                   else "")
                + "); " + ("the CLT check fails, so the CLT-based intervals are for comparison only" if failed else
                           "the CLT-based intervals (`cs_lower`, `cs_upper`, `clt_lower`, `clt_upper`) are for "
                           "comparison")
                + ".\n\n")
    if not all(c.get("clt_reliable") for c in st["estimates"]):
        return ""
    bayes = "; the Bayesian interval is for comparison" if has_bayes else ""   # the rule reads the sequence here
    return ("**Read first: the confidence sequence** (`cs_lower`, `cs_upper`: the CLT interval widened for looking "
            "after every stage); the CLT check passes, so the CLT-based intervals can be read" + bayes + ".\n\n")


def label_tables(s) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``labels.csv`` and ``draws.csv`` of ``session report``: the labels paid for, in a form any
    tool reads.  labels: every accepted label in arrival order -- the item's id as the pool gives
    it, the label (and its name where the session has a label map: the first name given for it),
    the stage, the draw it answered (stochastic oracle; empty for a deterministic one), the ingest
    (one per transaction) and the arrival time (UTC, ISO 8601).  draws: every draw in order -- its
    stage, item, whether it asked for a new label, the proposal probability q, the weight p/q and
    the label that answers it (empty while pending or skipped): all an importance-sampling
    estimate needs, R̂ = Σ w ℓ / Σ w (001 §3.1; ``tests/test_session.py`` recomputes F1 from it).
    A skipped item (``session skip``) has no label, so its draws' ``label`` is empty.  A label
    corrected after it arrived (``session correct``) is given as corrected (``corrected`` true;
    what arrived and each correction: ``corrections.csv``)."""
    import pandas as pd

    lab, draws = s.labels(), s.draws()
    names = {}
    for name, value in (s.config.get("label_map") or {}).items():
        names.setdefault(int(value), str(name))
    labels = pd.DataFrame({
        "item": lab["item"], "label": lab["label"].astype(int),
        **({"label_name": lab["label"].map(lambda v: names.get(int(v), ""))} if names else {}),
        "stage": lab["stage"].astype(int),
        "draw": pd.array(lab["draw"], dtype="Int64") if s.oracle == "stochastic" else pd.array([None] * len(lab), dtype="Int64"),
        "ingest": lab["ingest"].astype(int),
        "arrived_at": pd.to_datetime(lab["arrived_at"], unit="s", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "corrected": lab["corrected"].astype(bool)})
    if s.oracle == "stochastic":
        answer = dict(zip(lab["draw"].astype(int), lab["label"].astype(int)))
        y = draws["draw"].map(answer)
    else:
        answer = dict(zip(lab["row"].astype(int), lab["label"].astype(int)))
        y = draws["row"].map(answer)
    out = draws[["draw", "stage", "item", "new", "q", "weight"]].copy()
    out["new"] = out["new"].astype(bool)
    out["label"] = pd.array(y, dtype="Int64")
    return labels, out


def cmd_report(args, bar):
    """``session report``: write the session's report folder ``args.out``."""
    from . import plots
    from .per_class import per_class_table
    from .session import SessionError

    _check_folder(args.out)  # before the session is replayed
    s = open_session(args, bar)
    files = []
    try:
        os.makedirs(args.out, exist_ok=True)
        bar("writing tables", 0, 4)
        bayes = not args.no_bayesian
        summ = s.summary(level=args.level, bayesian=bayes)
        hist = s.history(level=args.level)
        p = os.path.join(args.out, "summary.csv")
        summ.to_csv(p, index=False)
        files.append(p)
        p = os.path.join(args.out, "history.csv")
        hist.to_csv(p, index=False)
        files.append(p)
        for name, table in zip(("labels.csv", "draws.csv"), label_tables(s)):
            p = os.path.join(args.out, name)
            table.to_csv(p, index=False)
            files.append(p)
        fixes = s.corrections()
        if fixes is not None and len(fixes):
            import pandas as pd

            fixes["at"] = pd.to_datetime(fixes["at"], unit="s", utc=True).dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            p = os.path.join(args.out, "corrections.csv")
            fixes.to_csv(p, index=False)
            files.append(p)
        bar("plotting", 1, 4)
        prog = s.plot_progress(os.path.join(args.out, "progress.png"), level=args.level, bayesian=bayes)
        files.append(prog)
        post = (plots.plot_session_posterior(s, os.path.join(args.out, "posterior.png"), args.level)
                if s.n_stages and bayes else None)
        if post:
            files.append(post)
        pr_df = None
        pr_note = pr_caveat = None
        pr_bayes = pr_alone = False
        if args.pr_curve:
            bar("PR curve", 2, 4)
            try:
                pr_df = _pr_curve_table(s, args.thresholds, args.level, bayesian=bayes)
                n_used = int(hist["labels"].iloc[-1]) if len(hist) else 0  # labels in the estimate
                pr_bayes = "precision_bayes_lower" in pr_df.columns
                pr_alone = pr_bayes and not pr_df["precision"].notna().any()   # the posterior's curve only
                pr_caveat = None if pr_alone else _pr_caveat(s, pr_bayes)
                plots.plot_pr_curve(pr_df, os.path.join(args.out, "pr_curve.png"), args.level,
                                    title=f"PR curve from {n_used} labels (design {s.design_name})", caveat=pr_caveat)
                files.append(os.path.join(args.out, "pr_curve.png"))
                p = os.path.join(args.out, "pr_curve.csv")
                pr_df.to_csv(p, index=False)
                files.append(p)
            except SessionError as exc:
                pr_note = f"PR curve not drawn: {exc.cli or exc}"
        bar("writing the report", 3, 4)
        # issue 15, item 4: the interval session status reads first leads here too -- the Bayesian one where
        # the CLT check fails (or has nothing to check), else the confidence sequence (the posterior is cached)
        rule = "auto" if bayes else False        # the Bayesian interval is in the tables; status's rule leads
        st = s.status(target_width=args.target_width, level=args.level, bayesian=rule)
        lead_bayes = st["headline_interval"] == "bayes"
        stop = st.get("stopping")                # the same rule, computed once by status
        first = s.components[: len(s.measures[0].names)][:8]
        hshort = hist[hist["component"].isin(first)][["stage", "labels", "draws", "ess", "max_weight", "component",
                                                      "estimate", "lower", "upper"]]
        order = (("measure", "component", "estimate", "bayes_lower", "bayes_upper", "bayes_median", "std_error",
                  "cs_lower", "cs_upper", "clt_lower", "clt_upper") if lead_bayes else
                 ("measure", "component", "estimate", "cs_lower", "cs_upper", "std_error", "clt_lower", "clt_upper",
                  "bayes_lower", "bayes_upper"))
        show = [c for c in order if c in summ.columns]
        md = ["# Labeling session report\n",
              f"Session `{s.path}` — pool `{s.config['pool'].get('name')}` ({s.pool.n_items:,} items), "
              f"measure(s) {', '.join(m.name for m in s.measures)}, design `{s.design_name}`, oracle "
              f"{s.oracle}, seed {s.seed}.\n",
              f"Labels spent: **{st['labels']}** ({st['labels_in_estimate']} in the estimate) in {st['stages']} "
              f"stage(s); draws {st['draws']}; effective sample "
              f"size (Σw)²/Σw² {fmt(st['ess'], 1)}; largest weight {fmt(st['max_weight'], 2)}.\n",
              "## Estimates\n",
              _read_first(lead_bayes, st, "bayes_lower" in summ.columns, stop),
              _md_table(summ[show].head(40)),
              "" if len(summ) <= 40 else f"\n({len(summ) - 40} more rows in summary.csv)\n",
              "".join(f"\n{x[0].upper()}{x[1:]} (`cs_lower`, `cs_upper` empty).\n" for x in [few_labels_line(st)] if x),
              "\n" + clt_check_line(st["estimates"], lead_bayes, labels=st.get("labels_in_estimate"),
                                    posterior=st.get("posterior_available", True), oracle=st.get("oracle", "deterministic"))
              + " (per component: `clt_check` in summary.csv)\n"]
        md += [f"\n**{x}**\n" for x in [unreached_line(st)] if x]
        md += [f"\n{x[0].upper()}{x[1:]} (`feasible_lower`, `feasible_upper` in summary.csv).\n" for x in [allowed_line(st)] if x]
        md += [f"\n{x[0].upper()}{x[1:]} (`blind_spot` in `session status --format json`).\n"
               for x in [blind_spot_text(st.get("blind_spot"), list(summ["component"]))] if x]
        away = outside_note(summ.to_dict("records"), " (`bayes_median`)") if lead_bayes else None
        if away:
            md.append("\n" + away[0].upper() + away[1:] + ".\n")
        if "bayes_collapsed" in summ.columns and summ["bayes_collapsed"].any():
            md.append("\n" + _collapsed_note(list(summ.loc[summ["bayes_collapsed"], "component"]),
                                             int(round(args.level * 100))) + " (`bayes_collapsed` in summary.csv)\n")
        skips = s.skip_summary()
        if skips is not None:
            p = os.path.join(args.out, "skipped.csv")
            skips["items"].to_csv(p, index=False)
            files.append(p)
            md += ["\n## Skipped items\n", skips["note"] + "\n", *(c + "\n" for c in skips["caveats"])]
            if "bayes_lower" in summ.columns:
                md.append(skips["bayesian"] + "\n")
            md.append("Skipped per stage: " + ", ".join(f"stage {k}: {v}" for k, v in skips["by_stage"].items())
                      + " (every skipped item, with its reason, in skipped.csv).\n")
        if fixes is not None and len(fixes):
            md += ["\n## Corrected labels\n",
                   f"{len(fixes)} label(s) were changed after they arrived (`session correct`); every estimate and "
                   f"interval here reads the labels in force from every draw (the draws' proposals stay those that "
                   f"drew them), and each stage's row of history.csv is recomputed with them. What arrived and "
                   f"each change, with its reason: corrections.csv; labels.csv marks the corrected labels.\n"]
        if stop:
            line = stopping_line(stop, int(round(args.level * 100)))
            md.append("\n" + line[0].upper() + line[1:] + ".\n")
        classes = None
        if bayes and s.pool.n_classes > 2:
            bar("each class's posterior", 3, 4)
            classes = per_class_table(s, args.level)
        if classes is not None:
            p = os.path.join(args.out, "per_class.csv")
            classes.to_csv(p, index=False)
            files.append(p)
            pct = int(round(args.level * 100))
            show_c = classes.assign(**{k: [f"{m:.3f} [{a:.3f}, {b:.3f}]" for m, a, b in
                                           zip(classes[k], classes[f"{k}_lower"], classes[f"{k}_upper"])]
                                       for k in ("f1", "precision", "recall")})[["class", "labels", "f1", "precision",
                                                                                  "recall"]]
            md += ["\n## Each class\n",
                   f"The posterior of each class's F1, precision and recall on this pool (median [{pct}% "
                   f"equal-tailed interval, the session's kind with several classes]; the session's posterior model, the same labels: the mean of the "
                   f"classes' F1 is macro-F1's posterior draw for draw; `per_class.csv`). `labels`: the class's "
                   f"labels in the estimate.\n", _md_table(show_c)]
        md += ["\n## Estimate and interval against labels spent\n", "![progress](progress.png)\n"]
        if post:
            md += ["\n## Posterior of the measure on this pool, with the CLT interval\n",
                   "![posterior](posterior.png)\n"]
        if pr_df is not None:
            md += ["\n## PR curve (same labels, 001 §3.3.1)\n", "![PR curve](pr_curve.png)\n"]
            if pr_alone:
                md.append("\nThe curve is the posterior's alone -- its median with its Bayesian band (shaded): the "
                          "finite-pool posterior of the curve given the same labels (the session's posterior model, "
                          "every unlabeled item's class drawn from it; `pr_curve.csv`'s `*_bayes_median` / "
                          "`*_bayes_lower` / `*_bayes_upper` columns). The design's estimate of a measure it was not "
                          + (f"created with needs importance-weighted draws, which design `{s.design_name}`'s rounds "
                             "are not.\n" if s.design_name.startswith("poisson") else
                             "created with needs draws that reach every item the measure counts, and these do not "
                             "(001 §3.3.1; create the session with `--measure pr_curve` for its estimate).\n"))
            elif pr_bayes:
                md.append("\nTwo curves: the design's estimate with its CLT band (dashed), and the posterior median "
                          "with its Bayesian band (shaded) -- the finite-pool posterior of the curve given the same "
                          "labels (the session's posterior model, every unlabeled item's class drawn from it; "
                          "`pr_curve.csv`'s `*_bayes_median` / `*_bayes_lower` / `*_bayes_upper` columns). In PR space "
                          "each band is the precision's interval at one threshold, drawn at its curve's recall; the "
                          "recall's own interval, often the wider, is the right panel's.\n")
            n_blind = int((pr_df["precision"].isna() | pr_df["recall"].isna()).sum())
            if n_blind and not pr_alone:
                md.append(f"\nAt {n_blind} of {len(pr_df)} thresholds the design's draws do not reach every item the "
                          "curve counts there (AIS draws nothing where the session's measure has no loss, e.g. "
                          "predicted negatives known to be negative, which a lower threshold counts): an importance-"
                          "weighted estimate would leave them out (001 §3.3.1), so there is none there"
                          + ("; the Bayesian band is drawn" if pr_bayes else "")
                          + ". For the design's estimate at every threshold, create the session with "
                          "`--measure pr_curve`.\n")
            if pr_caveat and pr_bayes:
                md.append("\nThe CLT check fails (above), so the curve's estimate and its CLT band rest on the positives "
                          "found: positives may hide where the design draws few items. The Bayesian band also "
                          "accounts for the items nobody labeled: read it.\n")
            elif pr_caveat:
                md.append("\nThe CLT check fails (above), so this curve and its CLT band rest on the positives found: "
                          "positives may hide where the design draws few items, and neither sees them.\n")
        if pr_note:
            md.append(f"\n{pr_note}\n")
        md += ["\n## History\n", _md_table(hshort)]
        p = os.path.join(args.out, "report.md")
        with open(p, "w", encoding="utf-8") as fh:
            fh.write("\n".join(md))
        files.append(p)
        p = os.path.join(args.out, "summary.md")
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(_md_table(summ[show]))
        files.append(p)
    finally:
        bar.done()
        s.close()
    if args.format == "json":
        print_json({"out": os.path.abspath(args.out), "files": [os.path.abspath(f) for f in files]})
    else:
        print(f"wrote {len(files)} files to {args.out}: " + ", ".join(os.path.basename(f) for f in files))
    return 0
