"""``bayes-eval session``: labeling sessions from the command line.

    bayes-eval session new DB --pool POOL --measure f1 --design ais [--seed S --depth 8 --strata 256]
    bayes-eval session new DB --pool POOL --design poisson-adaptive [--poisson-size exact|random]
    bayes-eval session new DB --pool POOL [--score-kind probability] [--threshold 0.5]   # how the pool is read
    bayes-eval session next DB --n 50 --out batch.csv          # or .jsonl / .json (Label Studio tasks)
    bayes-eval session next DB --out batch.json --fields title_a,title_b [--show-score] [--preannotate]
    bayes-eval session ingest DB labeled.csv                   # or .jsonl / Label Studio .json export
    bayes-eval session status DB [--format json] [--target-width W]
    bayes-eval session report DB --out report/ [--pr-curve]

The session file records the pool's path, so ``next``, ``ingest``, ``status`` and
``report`` need no ``--pool`` (``--pool`` overrides it; the pool's fingerprint is checked
either way; it is read as at creation: score kind and threshold are recorded).  Every
option value is checked before the session is opened; errors print one message on stderr
(in the command line's terms: flags, not Python names) and exit with status 2, with
nothing changed.  Long steps show a progress bar on stderr when it is a terminal.

Importing this module is cheap (no JAX); the work happens in :mod:`bayes_eval.session`.
"""
from __future__ import annotations

import json
import os
import shlex
import sqlite3
import sys
import time

from .posterior import LOW_SAMPLER_ESS
from .results import BAYES_STOP_INTERVALS, STOP_CHECK_MAX, blind_spot_text
from .results import collapsed_text as _collapsed_note
from .session_cli_text import (allowed_line, check_skip_cancelled, clt_check_line, few_labels_line, fmt,
                               ingest_counts, jsonable, open_session, outside_note, posterior_reads, print_json,
                               resolve_unused_line, skipped_by_everyone_line, stopping_line,
                               unreached_line)
from .session_report_cli import cmd_report
from .session_team_cli import (TEAM_COMMANDS, add_correct_arg, add_label_reading_args, add_task_content_args,
                               add_team_parsers)

__all__ = ["add_session_parser", "cmd_session", "add_pool_reading_args", "read_pool", "jsonable"]


# ------------------------------------------------------------------------------ parser
def add_session_parser(subparsers):
    """Register ``session`` and its sub-commands on the ``bayes-eval`` parser."""
    sp = subparsers.add_parser("session", help="labeling sessions: next batch, ingest labels, status, report",
                               description="Labeling sessions stored in one SQLite file (never loses a label).")
    ss = sp.add_subparsers(dest="session_command", required=True,
                           metavar="{new,next,ingest,status,report,push,pull,skip,correct,label-config}")

    def common(p, pool=True):
        p.add_argument("db", help="the session file (SQLite)")
        if pool:
            p.add_argument("--pool", default=None,
                           help="the pool file (default: the one recorded in the session; fingerprint-checked)")
            add_engine_args(p)
        p.add_argument("--format", choices=["text", "json"], default="text")
        p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")

    n = ss.add_parser("new", help="create a session on a pool")
    common(n, pool=False)
    n.add_argument("--pool", required=True,
                   help="Parquet, CSV / TSV or JSON lines pool (columns item, score, pred and the annotators' own; "
                        "other names: --id-column, --score-column, --pred-column) or 'demo'")
    add_pool_reading_args(n)
    add_engine_args(n)
    n.add_argument("--measure", action="append", default=None,
                   help="measure name; repeat or comma-separate for several (the labels serve all; the design "
                        "targets the first). Default f1")
    n.add_argument("--design", default="ais",
                   help="passive, stratified, is, oasis, ais, poisson, poisson-adaptive (default ais)")
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--oracle", default="deterministic", choices=["deterministic", "stochastic"])
    n.add_argument("--strata", type=int, default=256, help="number of score strata K (default 256)")
    n.add_argument("--depth", type=int, default=8, help="depth of the Dirichlet tree (1 = flat)")
    n.add_argument("--branching", type=int, default=None)
    n.add_argument("--model", default="auto",
                   help="oracle model for ais and poisson-adaptive: auto (default: dirichlet-tree; independent where "
                        "the scores fill two strata, e.g. a score column that is the predictions), dirichlet-tree, "
                        "independent, classifier (poisson-adaptive also: calibrated)")
    n.add_argument("--eps", type=float, default=1e-3, help="ε floor of the AIS / IS / OASIS proposals")
    n.add_argument("--delta", type=float, default=0.0, help="share of p(x) mixed into the AIS proposal (001 §3.3.1)")
    n.add_argument("--audit-floor", type=float, default=None,
                   help="ais: the least share of each proposal's mass kept on unlabeled items (default 0.01; 0: off). "
                        "Where the model is sure the unlabeled items hold nothing (a big tie at the lowest score) "
                        "the rest of the budget audits them instead of stalling")
    n.add_argument("--lam", type=float, default=0.9, help="λ-mixing of static IS (000 eq. 13)")
    n.add_argument("--beta", type=float, default=1.0, help="β of the fbeta measure")
    n.add_argument("--thresholds", type=int, default=1024, help="grid size for pr_curve / roc_curve / auc")
    n.add_argument("--system", default="0", metavar="K",
                   help="for a pool of several systems (--score-column / --pred-column NAME,NAME,... in system "
                        "order): which system's measure, 0.. (default 0); the strata follow its score")
    n.add_argument("--label-map", default=None,
                   help="choice strings -> labels for ingested files (and for the pool's pred / label columns where "
                        "they are written as names), e.g. negative=0,positive=1")
    n.add_argument("--companion", default="auto", choices=["auto", "calibrated", "none"],
                   help="ais / poisson-adaptive: companion model mixed into the proposals (auto: the calibrated "
                        "model on binary pools; none: the Dirichlet tree alone)")
    n.add_argument("--poisson-size", default=None, choices=["exact", "pareto", "sequential", "random"],
                   help="Poisson designs: size of a round of `next --n N`: exact (= pareto, Pareto sampling; the "
                        "default of poisson-adaptive), sequential (sequential Poisson sampling) or random (true "
                        "Poisson rounds, mean N; the static poisson design always)")
    n.add_argument("--poisson-option", action="append", default=None, metavar="KEY=VALUE",
                   help="further Poisson design settings (repeatable): estimator=ht|difference, form=..., "
                        "weights=..., variance=..., poisson_eps=..., defensive=..., defensive_form=..., em_iters=...")

    x = ss.add_parser("next", help="draw the next batch and write it for annotators")
    common(x)
    x.add_argument("--n", type=int, default=50, help="items that need a label (default 50)")
    x.add_argument("--out", default="-",
                   help="batch.csv, batch.jsonl or batch.json (Label Studio tasks); - = CSV on stdout")
    add_task_content_args(x)  # --fields, --show-score, --preannotate, --from-name (as session push)

    i = ss.add_parser("ingest", help="ingest labeled files (CSV, JSONL, Label Studio JSON export)")
    common(i)
    i.add_argument("files", nargs="+", help="labeled files; each is one transaction")
    add_label_reading_args(i)  # --label-map, --from-name, --resolve (as session pull)
    add_correct_arg(i)  # --correct (as session pull)
    i.add_argument("--skip-cancelled", action="store_true",
                   help="record the open batch's items that every annotator skipped (a Label Studio JSON "
                        "export's cancelled annotations) as impossible to label, as session pull does")

    s = ss.add_parser("status", help="estimate, intervals, labels spent, weights, stopping rule")
    common(s)
    s.add_argument("--target-width", type=float, default=None,
                   help="stopping rule: is the interval narrower than W, and how many more labels (extrapolated)")
    s.add_argument("--level", type=float, default=0.95)
    bz = s.add_mutually_exclusive_group()
    bz.add_argument("--bayesian", action="store_const", const=True, dest="bayesian", default="auto",
                    help="always add the Bayesian interval, read it first and stop on it (--target-width: the "
                         "design's Bayesian rule -- with ais narrow enough where the CLT check's ratio is at most "
                         "60, with poisson-adaptive narrow enough, otherwise narrow enough after each of the last "
                         "3 stages), whatever the CLT check; by default it is added, read first and stopped on "
                         "where the CLT check fails (every design, deterministic oracle)")
    bz.add_argument("--no-bayesian", action="store_const", const=False, dest="bayesian",
                    help="never compute the Bayesian interval (faster by ~2.5 s: the posterior); the confidence "
                         "sequence is then read first, and --target-width stops on it where the CLT check passes")

    r = ss.add_parser("report", help="tables (CSV, markdown) and PNG plots in a folder")
    common(r)
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--level", type=float, default=0.95)
    r.add_argument("--pr-curve", action="store_true", help="also the PR curve estimated from the same labels")
    r.add_argument("--thresholds", type=int, default=64, help="thresholds of the reported PR curve (default 64)")
    r.add_argument("--target-width", type=float, default=None)
    r.add_argument("--no-bayesian", action="store_true",
                   help="skip the Bayesian posterior (its first computation compiles for a while)")
    add_team_parsers(ss, common)  # push, pull, skip, label-config (session_team_cli)
    return sp


def add_pool_reading_args(p):
    """``--score-kind`` and ``--threshold``: how the pool's file is read
    (:func:`bayes_eval.registry.load_pool`)."""
    p.add_argument("--score-kind", default="auto", choices=["auto", "margin", "probability", "logit", "rank"],
                   help="what the pool's scores are (default auto: all in [0, 1] -> probability, a permutation of "
                        "1..N -> rank, else margin); decides the strata's scale and the models' prior")
    p.add_argument("--threshold", type=float, default=None, metavar="T",
                   help="for a pool without a 'pred' column: predictions are score >= T (in the score's units, "
                        "e.g. 0.5 for probabilities, 0 for margins)")
    p.add_argument("--id-column", default=None, metavar="NAME",
                   help="the pool's column holding the item ids, when it is not named 'item' (default: the 'item' "
                        "column, else the file's index, else row numbers); labels are matched to items by these ids")
    p.add_argument("--classes", type=int, default=2, metavar="C",
                   help="the size of the label set: pred / label hold 0..C-1 (default 2; several classes need C)")
    for role, what in (("score", "the classifier's scores"), ("pred", "the classifier's predicted labels"),
                       ("label", "the ground truth (simulate's oracle)")):
        p.add_argument(f"--{role}-column", default=None, metavar="NAME",
                       help=f"the pool's column holding {what}, when it is not named '{role}'")
    p.add_argument("--prob-columns", default=None, metavar="NAME,NAME,...",
                   help="a pool of several classes (--classes C): the C columns holding the classifier's probability "
                        "of each class, in class order 0..C-1; the score is then the predicted class's probability "
                        "and the Bayesian interval's model splits each class's errors by them (without them, by how "
                        "often each class is predicted); a binary pool's two (P0,P1): the score is P1")


def add_engine_args(p):
    """``--engine`` and ``--scheduler``: where a partitioned pool (a directory or glob of
    Parquet files) is read (:meth:`bayes_eval.pool.Pool.from_parquet_dataset`)."""
    p.add_argument("--engine", default="auto", choices=["auto", "memory", "dask"],
                   help="for a partitioned pool (DIR or GLOB of Parquet files): read it whole (memory) or keep it on "
                        "a Dask cluster (dask); default auto: memory when it fits in a quarter of RAM")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="with --engine dask: the dask.distributed scheduler to use (default: a local cluster)")


def parse_system(text, n_systems: int) -> int:
    """``--system K``: one system per session.  Several (``K,L``, ``all``) are refused, saying
    why: the strata follow one system's score, and in a walk on a two-system pool (stop 80) the
    other system's Bayesian interval of F1 missed its truth (0.29-0.33 against 0.40; its AIS
    estimate, 0.73 in that run, rested on a few heavy weights)."""
    from .errors import UsageError

    text = str(text).strip()
    if text == "all" or "," in text:
        raise UsageError(f"--system {text}: one system per session; the strata follow that system's score, and "
                         f"another system's Bayesian interval measured from them missed its truth: run a session per "
                         f"system (measures of several systems in one session are Python's, Session.create with "
                         f"{{'name': ..., 'system': K}} specs, their Bayesian intervals unchecked)")
    try:
        k = int(text)
    except ValueError:
        raise UsageError(f"--system {text!r}: give a system number 0..{n_systems - 1}") from None
    if not 0 <= k < n_systems:
        raise UsageError(f"--system {text}: the pool has {n_systems} system(s), 0..{n_systems - 1}"
                         + ("" if n_systems > 1 else "; several systems are read from --score-column / "
                            "--pred-column NAME,NAME,..."))
    return k


def pool_columns(args) -> dict:
    """``--score-column`` / ``--pred-column`` / ``--label-column`` / ``--prob-columns`` as
    ``load_pool``'s ``columns`` (``"prob"``: a list of column names)."""
    out = {r: getattr(args, f"{r}_column", None) for r in ("score", "pred", "label")
           if getattr(args, f"{r}_column", None) is not None}
    for r in ("score", "pred"):          # several systems: NAME,NAME,... in system order
        if r in out and "," in str(out[r]):
            out[r] = [c.strip() for c in str(out[r]).split(",")]
    if getattr(args, "prob_columns", None) is not None:
        out["prob"] = [c.strip() for c in str(args.prob_columns).split(",")]
    return out


def read_pool(path, score_kind="auto", threshold=None, engine="auto", scheduler=None, id_column=None, columns=None,
              label_map=None, n_classes=2):
    """:func:`bayes_eval.registry.load_pool` for the command line (its errors carry a
    ``cli`` wording naming ``--threshold`` / ``--score-kind``, :func:`errors.cli_message`)."""
    from .annotate import parse_label_map
    from .checks import check_label_map
    from .registry import load_pool

    label_map = parse_label_map(label_map) if label_map is not None else None
    check_label_map(label_map, n_classes)   # a new pool's map: two names for one class, none for another
    return load_pool(path, score_kind=None if score_kind == "auto" else score_kind, threshold=threshold,
                     engine=None if engine in (None, "auto") else engine, scheduler=scheduler, id_column=id_column,
                     columns=columns, label_map=label_map, n_classes=n_classes)


# ------------------------------------------------------------------------------ helpers
class _Bar:
    """A tiny progress bar on stderr (only when stderr is a terminal)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self._last = ""
        self._t0 = time.monotonic()

    def __call__(self, msg, done, total):
        if not self.enabled:
            return
        width = 24
        frac = 0.0 if not total else min(max(done / total, 0.0), 1.0)
        fill = int(round(frac * width))
        line = f"\r[{'#' * fill}{'.' * (width - fill)}] {msg}"
        if total and total > 1:
            line += f" {done}/{total}"
        line += f"  {time.monotonic() - self._t0:5.1f}s"
        pad = max(0, len(self._last) - len(line))
        sys.stderr.write(line + " " * pad)
        sys.stderr.flush()
        self._last = line

    def done(self):
        if self.enabled and self._last:
            sys.stderr.write("\r" + " " * len(self._last) + "\r")
            sys.stderr.flush()
            self._last = ""


def _parse_options(items):
    """``KEY=VALUE`` strings -> dict (numbers stay strings; the session converts them)."""
    from .errors import UsageError

    out = {}
    for it in items:
        for part in str(it).split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise UsageError(f"--poisson-option expects KEY=VALUE, got {part!r}")
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


# ------------------------------------------------------------------------------ commands
def _cmd_new(args, bar):
    from .errors import UsageError
    from .registry import design_spec
    from .session import Session
    from .store import Store

    # before the pool is read: the file can be created, the design and its flags go together
    Store.check_new(args.db)
    if design_spec(args.design).kind != "rounds" and (args.poisson_size is not None or args.poisson_option):
        raise UsageError(f"--poisson-size and --poisson-option apply to the Poisson designs, not to {args.design!r}")
    if args.audit_floor is not None and args.design != "ais":
        raise UsageError(f"--audit-floor applies to the ais design, not to {args.design!r}")
    bar("reading the pool", 0, 1)
    pool = read_pool(args.pool, args.score_kind, args.threshold, args.engine, args.scheduler, args.id_column,
                     pool_columns(args), args.label_map, args.classes)
    system = parse_system(args.system, pool.n_systems)
    measures = [p.strip() for m in (args.measure or ["f1"]) for p in m.split(",") if p.strip()]
    poisson_kw = {}
    if args.poisson_size is not None:
        poisson_kw["fixed_size"] = None if args.poisson_size == "random" else args.poisson_size
    if args.poisson_option:
        poisson_kw["poisson_options"] = _parse_options(args.poisson_option)
    s = Session.create(args.db, pool, measures, args.design, seed=args.seed, oracle=args.oracle,
                       n_strata=args.strata, depth=args.depth, branching=args.branching, model=args.model,
                       eps=args.eps, delta=args.delta, lam=args.lam, thresholds=args.thresholds, beta=args.beta,
                       system=system, label_map=args.label_map, pool_path=args.pool, progress=bar,
                       companion=args.companion, audit_floor=args.audit_floor, **poisson_kw)
    bar.done()
    out = {"session": os.path.abspath(args.db), "pool": s.config["pool"], "measures": [m.name for m in s.measures],
           "components": len(s.components), "design": s.design_name, "oracle": s.oracle, "seed": s.seed,
           "strata": int(s._core.strata.n_strata), "strata_nonempty": int((s._core.strata.sizes > 0).sum()),
           "cells": s.cells.n_cells,
           "companion": s.config["design"].get("companion"), "pool_notes": list(pool.notes)}
    asked = args.model      # Session.create records the model "auto" resolved to
    out["oracle_model"] = s.config["design"].get("model") if s.design_name in ("ais", "poisson-adaptive") else None
    poisson = s.design_name in ("poisson", "poisson-adaptive")
    if poisson:
        dkw = s.config["design"]
        out["poisson"] = {k: dkw.get(k) for k in ("fixed_size", "estimator", "form", "weights", "variance",
                                                   "poisson_eps", "defensive", "defensive_form", "model",
                                                   "companion")}
        out["poisson"]["round_size"] = "random" if dkw.get("fixed_size") is None else "exact"
    s.close()
    if getattr(pool, "partitioned", False):
        pool.close()
    if args.format == "json":
        print_json(out)
    else:
        nonempty = out["strata_nonempty"]   # a pool without scores, or one big tie, fills few strata
        print(f"created session {args.db}: pool {out['pool']['name']!r} ({out['pool']['n_items']:,} items), "
              f"measure {', '.join(out['measures'])}, design {out['design']}, oracle {out['oracle']}, "
              f"seed {out['seed']} "
              f"({out['strata']} strata{'' if nonempty == out['strata'] else f', {nonempty} non-empty'}, "
              f"{out['cells']} cells)"
              + "".join(f"; {note}" for note in out["pool_notes"]))
        if poisson:
            p = out["poisson"]
            est = "HT" if p["estimator"] == "ht" else p["estimator"]
            if out["design"] == "poisson":
                print(f"Poisson rounds: distinct items, nested Poisson samples of random size (mean N per round); "
                      f"{est} estimator")
            else:
                print("Poisson rounds: distinct items, "
                      + ("exactly N per round (" + p["fixed_size"] + " sampling)" if p["round_size"] == "exact"
                         else "random size with mean N per round")
                      + f"; {est} estimator, {p['weights']} round weights"
                      + (f", {p['companion']} companion model" if p.get("companion") else ""))
        elif out["companion"]:
            print(f"AIS proposals mixed with the {out['companion']} companion model")
        if asked == "auto" and out["oracle_model"] == "independent":
            print("oracle model: a Beta per stratum (--model auto: the scores fill two strata, so a Dirichlet tree "
                  "over them would let the draws leave the predicted negatives before any positive is found there)")
        print(f"next: bayes-eval session next {shlex.quote(args.db)} --n 50 --out batch.csv")
    return 0


def _cmd_next(args, bar):
    from . import annotate
    from .errors import UsageError

    if args.out != "-":
        annotate.prepare_output(args.out)  # before the session is replayed
    elif args.fields or args.show_score or args.preannotate:
        raise UsageError("--fields, --show-score and --preannotate shape a batch file for annotators: give --out "
                         "batch.csv / batch.json")
    s = open_session(args, bar)
    bar.done()
    try:
        if args.out == "-":
            df = s.next_batch(args.n)
            # the annotators' view, as in a batch file: not the model's scores or probabilities
            out, _ = annotate.task_frame(s.pool, df, annotate.task_columns(annotate.pool_columns(s.pool)))
            out = out.assign(label="")
            if args.format != "json":
                out.to_csv(sys.stdout, index=False)
        else:
            df = s.export_batch(args.out, args.n, fields=args.fields, show_score=args.show_score,
                                preannotate=args.preannotate, from_name=args.from_name)
        info = {"stage": int(df["stage"].iloc[0]) if len(df) else None, "items": len(df),
                "fully_labeled": bool(s.fully_labeled),
                "reissued": bool(df.attrs.get("reissued")), "stalled": bool(df.attrs.get("stalled")),
                "out": None if args.out == "-" else os.path.abspath(args.out), "labels": s.n_labels}
        if "complete" in df.attrs:  # Poisson designs
            info["complete"] = bool(df.attrs["complete"])
            info["empty_rounds"] = int(df.attrs.get("empty_rounds", 0))
    finally:
        s.close()
    if args.format == "json":
        if args.out == "-":
            info["batch"] = json.loads(df.to_json(orient="records"))
        print_json(info)
        return 0
    msg = sys.stderr if args.out == "-" else sys.stdout
    if not len(df) and info["fully_labeled"]:
        print("no item left to label: every item of the pool is labeled, so the value on the pool is exact "
              f"(bayes-eval session status {shlex.quote(args.db)} shows it)", file=msg)
    elif not len(df):
        print("no item left to label: the proposal reaches no unlabeled item (the pool is exhausted)", file=msg)
    elif info["reissued"]:
        print(f"batch of stage {info['stage']} is still open: re-issued its {len(df)} item(s) awaiting a label"
              + (f" to {args.out}" if args.out != "-" else ""), file=msg)
    else:
        print(f"wrote {len(df)} item(s) to label (stage {info['stage']})"
              + (f" to {args.out}" if args.out != "-" else "")
              + (" — fewer than asked: the pool has no more reachable unlabeled items" if info["stalled"] else "")
              + (" — the last items that can matter: once labeled the estimate is exact"
                 if info.get("complete") else ""),
              file=msg)
    return 0


def _recorded_id_column(db):
    """The pool's id column a session records (``--id-column``), read before the replay; None
    where it has none or the file cannot be read (opening it then says why)."""
    from .errors import SessionError
    from .store import Store

    try:
        store = Store.open(db)
    except SessionError:
        return None
    try:
        pool = (store.meta().get("config") or {}).get("pool") or {}
        return (pool.get("read") or {}).get("id_column")
    finally:
        store.close()


def _cmd_ingest(args, bar):
    from . import annotate

    id_column = _recorded_id_column(args.db)
    # every file read (and refused if unreadable) before the session is replayed, and read once
    records = [annotate.read_labels(f, from_name=args.from_name, id_column=id_column) for f in args.files]
    s = open_session(args, bar)
    bar.done()
    results = []
    try:
        check_skip_cancelled(args, s)
        for f, recs in zip(args.files, records):
            r = s.ingest_file(f, label_map=args.label_map, from_name=args.from_name, resolve=args.resolve,
                              correct=args.correct, records=recs)
            # tasks every annotator skipped (Label Studio's cancelled annotations) that the open batch awaits
            pending = {str(v): v.item() if hasattr(v, "item") else v for v in s.pending()["item"]}
            nobody = [pending[str(v)] for v in dict.fromkeys(recs.cancelled_items) if str(v) in pending]
            skip = (s.skip(nobody, reason=f"skipped by every annotator ({f})")
                    if args.skip_cancelled and nobody else None)
            results.append((f, r, nobody, skip))
            if args.format != "json":
                _print_ingest(args, f, r, nobody, skip)
    finally:
        s.close()
    note = resolve_unused_line(args.resolve, s.oracle)
    if note and args.format != "json":
        print(note)
    if args.format == "json":
        print_json({"files": [{"file": f, **r._asdict(), "cancelled_items": [str(v) for v in nobody],
                               "skipped_now": skip.n_new if skip is not None else 0}
                              for f, r, nobody, skip in results],
                    "labels": results[-1][1].labels if results else None})
    return 0


def _print_ingest(args, f, r, nobody, skip):
    """The text lines of one file's ingest: what it added, and what it could not (as session pull)."""
    if r.already_ingested and not r.n_corrected and not nobody:
        print(f"{f}: already ingested — nothing changed")
        return
    parts = [f"{r.n_new} new label(s)"] + ([f"{r.n_corrected} corrected"] if r.n_corrected else [])
    parts += ingest_counts(r, args.resolve)
    if r.n_skipped:
        parts.append(f"{r.n_skipped} row(s)/task(s) without a label left out")
    if r.n_cancelled:
        parts.append(f"{r.n_cancelled} skipped/cancelled annotation(s) not ingested")
    closed = r.stage_closed or (skip is not None and skip.stage_closed)
    pending = skip.pending if skip is not None else r.pending
    state = (f"stage {skip.stage if skip is not None and skip.stage_closed else r.stage} complete, estimate updated"
             if closed else f"{pending} label(s) still missing in the open batch" if pending else "")
    print(f"{f}: {', '.join(parts)}; {r.labels} labels in the session" + (f"; {state}" if state else ""))
    line = skipped_by_everyone_line(args.db, nobody, skip, "ingest")
    if line:
        print(line)


def _status_text(st):
    pool = st["pool"]
    lines = [f"session {st['session']}: pool {pool.get('name')!r} ({pool.get('n_items', 0):,} items), "
             f"measure {', '.join(st['measures'])}, design {st['design']}, oracle {st['oracle']}, seed {st['seed']}",
             f"labels spent: {st['labels']}"
             + (f" ({st['labels_in_estimate']} in the estimate)" if st["labels_in_estimate"] != st["labels"] else "")
             + f" in {st['stages']} stage(s); draws {st['draws']}"
             + (f"; open batch: {st['pending']} item(s) awaiting a label" if st["pending"] else ""),
             f"effective sample size (Σw)²/Σw²: {fmt(st['ess'], 1)}; largest weight: {fmt(st['max_weight'], 2)}"]
    pr = st.get("proposal")
    if pr and not st.get("fully_labeled") and (pr["unlabeled_share"] < 0.5 or pr.get("audit_floor_binds")):
        # where the draws go once the design has labeled what its model finds worth labeling
        share = pr["unlabeled_share"]
        lines.append(f"next stage: {share:.2%} of the proposal on unlabeled items"
                     + (f" (about {1 / share:,.0f} draws per new label)" if share > 0 else " (no new label can be drawn)")
                     + (f"; the audit floor ({100 * pr['audit_floor']:g}%) holds it there: the labels left go to an audit "
                        f"of the items the model rates as empty" if pr.get("audit_floor_binds") and share > 0 else ""))
    if st.get("corrections"):
        lines.append(f"corrected: {st['corrections']} label(s) changed after they arrived (session correct); the "
                     f"estimates use the labels in force; session report lists each change in corrections.csv")
    if st.get("skipped"):
        lines.append(f"skipped: {st['skipped']} item(s) nobody can label — {st['skipped_note'].split(': ', 1)[1]}")
    if st.get("poisson"):
        p = st["poisson"]
        lines.append(f"Poisson rounds: {p['rounds']} ({'random size' if p['round_size'] == 'random' else 'exact size'})"
                     + ("; every item that can matter is labeled: the estimate is exact" if p.get("exact") else ""))
    lvl = int(round(st["level"] * 100))
    comps = st["estimates"]
    has_b = any("bayes_lower" in c for c in comps)
    w = max(9, max(len(c["component"]) for c in comps) if comps else 9)
    # the headline interval first (issue 15, item 4): the Bayesian one where the CLT check fails
    cols = [("cs", f"{lvl}% confidence sequence", 26), ("clt", f"{lvl}% CLT interval", 22)]
    if has_b:
        b = ("bayes", f"{lvl}% Bayesian interval", 24)
        cols = [b] + cols if st.get("headline_interval") == "bayes" else cols + [b]
    lines.append(f"{'component':<{w}}  {'estimate':>9}" + "".join(f"  {t:>{n}}" for _, t, n in cols))
    for c in comps[:12]:
        row = f"{c['component']:<{w}}  {fmt(c['estimate']):>9}"
        for key, _, n in cols:
            iv = (f"[{fmt(c.get(key + '_lower'))}, {fmt(c.get(key + '_upper'))}]"
                  if c.get(key + "_lower") is not None else "undefined")
            row += f"  {iv:>{n}}"
        lines.append(row)
    if len(comps) > 12:
        lines.append(f"... {len(comps) - 12} more component(s); --format json lists all")
    lines += [x for x in [unreached_line(st)] if x]
    stop_kind = (st.get("stopping") or {}).get("kind")
    if st.get("headline_interval") == "bayes":
        lines.append("read first: the Bayesian interval (" + posterior_reads(st.get("oracle", "deterministic"))
                     + ("; the stopping rule reads it" if stop_kind in BAYES_STOP_INTERVALS else "")
                     + "); the confidence sequence and the CLT interval are for comparison.")
        away = outside_note(comps)
        if away:
            lines.append("note: " + away)
    # where the confidence sequence is the interval read first (the CLT check passes), say so
    cs_first = (st.get("headline_interval") == "clt-cs" and bool(comps)
                and all(c.get("clt_reliable") for c in comps))
    lines.append(("read first: " if cs_first else "")
                 + "the confidence sequence widens the CLT interval for looking after every stage"
                 + (" (the stopping rule uses it, where the CLT check passes)" if stop_kind == "clt-cs" else "")
                 + "; the CLT interval is for one fixed budget."
                 + (" The stopping rule uses the Bayesian interval: narrow enough after each of the last 3 stages "
                    "(one odd posterior cannot stop it)." if stop_kind == "bayes-stable" else
                    f" The stopping rule uses the Bayesian interval: narrow enough where the CLT check's ratio is at "
                    f"most {STOP_CHECK_MAX:g} (above it positives may hide where the draws have not reached)."
                    if stop_kind == "bayes-checked" else
                    " The stopping rule uses the Bayesian interval: narrow enough after the last stage."
                    if stop_kind == "bayes" else ""))
    few = few_labels_line(st)
    if few:
        lines.append(few)
    lines.append(clt_check_line(comps, labels=st.get("labels_in_estimate"), posterior=st.get("posterior_available", True),
                                oracle=st.get("oracle", "deterministic")))
    lines += [x for x in [allowed_line(st), blind_spot_text(st.get("blind_spot"), [c["component"] for c in comps])] if x]
    flat = [c["component"] for c in comps if c.get("bayes_collapsed")]
    if flat:
        lines.append(_collapsed_note(flat, lvl))
    if st.get("posterior_sampler_ess") is not None and st["posterior_sampler_ess"] < LOW_SAMPLER_ESS:
        lines.append(f"note: the Bayesian interval rests on few parameter values (importance ESS "
                     f"{st['posterior_sampler_ess']:.1f} of 1024 proposals): read it as one guess; "
                     "bayes_eval.report.report_from_session fits the model by NUTS, with R-hat and ESS")
    if st.get("fully_labeled"):
        ex = ", ".join(f"{k} = {fmt(v)}" for k, v in list(st["exact"].items())[:12])
        lines.append(f"every item of the pool is labeled: exact value on the pool {ex} (nothing more to label)")
    if st.get("poisson") and not st["poisson"].get("exact") and not has_b:
        lines.append("note: a Poisson design's CLT interval cannot see relevant items that were never drawn and is "
                     "often too narrow before every item that can matter is labeled (measured: 25% coverage at "
                     "1000 labels on abt-buy); add --bayesian for the finite-pool Bayesian interval")
    if st.get("stopping"):
        lines.append(stopping_line(st["stopping"], lvl))
    return "\n".join(lines)


def _cmd_status(args, bar):
    s = open_session(args, bar)
    try:
        bar("estimating", 0, 1)
        st = s.status(target_width=args.target_width, level=args.level, bayesian=args.bayesian)
    finally:
        bar.done()
        s.close()
    if args.format == "json":
        print_json(st)
    else:
        print(_status_text(st))
    return 0


_COMMANDS = {"new": _cmd_new, "next": _cmd_next, "ingest": _cmd_ingest, "status": _cmd_status, "report": cmd_report,
             **TEAM_COMMANDS}


def cmd_session(args) -> int:
    """Run ``bayes-eval session <command>``; errors -> message on stderr, exit 2."""
    from .annotate import os_problem
    from .errors import PoolError, SessionError, cli_message

    bar = _Bar(not getattr(args, "no_progress", False))
    try:
        return _COMMANDS[args.session_command](args, bar)
    except BrokenPipeError:  # e.g. `... | head`: the reader left, nothing to report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (SessionError, PoolError, ValueError) as exc:
        bar.done()
        print(f"bayes-eval: error: {cli_message(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        bar.done()
        print(f"bayes-eval: error: {exc.filename + ': ' if exc.filename else ''}{os_problem(exc)}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        bar.done()
        print(f"bayes-eval: error: session file {args.db}: {exc}", file=sys.stderr)
        return 2
