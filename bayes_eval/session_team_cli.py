"""``bayes-eval session push / pull / skip / label-config``: working with an annotation team.

    bayes-eval session label-config DB [--fields title_a,title_b]        # paste into the project's Labeling Interface
    bayes-eval session push DB --label-studio URL --project ID [--n 50] [--fields ...] [--show-score] [--preannotate]
    bayes-eval session next DB --out batch.json [--fields ...] [--show-score] [--preannotate]   # the file route
    bayes-eval session pull DB --label-studio URL --project ID [--resolve error|majority|ground-truth|first|EMAIL]
    bayes-eval session skip DB ITEM... [--reason TEXT]
    bayes-eval session correct DB [ITEM LABEL]... [--file FILE] [--reason TEXT]

The Label Studio token comes from ``LABEL_STUDIO_API_KEY`` or ``--token``; the commands need
the optional extra ``pip install "bayes_eval[labelstudio]"`` (:mod:`bayes_eval.labelstudio`).
``skip`` records items nobody can label; the estimate is then of the measure on the items
that can be labeled (:mod:`bayes_eval.session_skip`); ``correct`` changes labels already
accepted, keeping what arrived (:mod:`bayes_eval.session_corrections`).  Registered by
:mod:`bayes_eval.session_cli`; importing this module is cheap (no JAX, no SDK).
"""
from __future__ import annotations

import os
import shlex
import sys

from .session_cli_text import (check_skip_cancelled, ingest_counts, open_session, print_json, resolve_unused_line,
                               skipped_by_everyone_line)

__all__ = ["add_team_parsers", "add_task_content_args", "add_label_reading_args", "add_correct_arg", "TEAM_COMMANDS",
           "RESOLVE_HELP"]

RESOLVE_HELP = ("several annotations of an item that disagree (Label Studio exports): error (refuse, naming the task, "
                "annotation ids and annotators; default), majority, ground-truth (the annotation marked ground truth), "
                "first (the earliest), or an annotator's email / username (their label). Stochastic-oracle sessions "
                "take every annotation as a label")


def add_task_content_args(p, preannotate: bool = True):
    """``--fields``, ``--show-score`` (what annotators see), ``--preannotate`` (unless
    ``preannotate=False``) and ``--from-name`` (the Choices control tasks are made for):
    ``session push``, ``session next --out FILE`` and (without ``--preannotate``)
    ``session label-config``."""
    p.add_argument("--fields", default=None, metavar="COL,...",
                   help="pool columns shown to annotators (default: the pool's own columns except model scores "
                        "and probabilities)")
    p.add_argument("--show-score", action="store_true",
                   help="also the model's score and probability columns (they can anchor annotators)")
    if preannotate:
        p.add_argument("--preannotate", action="store_true",
                       help="add the classifier's prediction (pred) as a Label Studio prediction (in a .csv / .tsv "
                            "batch file: a prediction column)")
    p.add_argument("--from-name", default="label", help="the Choices control's name (default label)")


def add_label_reading_args(p):
    """``--label-map``, ``--from-name`` and ``--resolve``: how annotations are read
    (``session ingest`` and ``session pull``)."""
    p.add_argument("--label-map", default=None, help="choice strings -> labels, e.g. negative=0,positive=1")
    p.add_argument("--from-name", default=None,
                   help="Label Studio: the Choices control holding the label (JSON, JSON_MIN, CSV, TSV exports)")
    p.add_argument("--resolve", default="error", metavar="RULE", help=RESOLVE_HELP)


def add_correct_arg(p):
    """``--correct`` (``session ingest`` and ``session pull``)."""
    p.add_argument("--correct", action="store_true",
                   help="a label that differs from the one the session holds for the item (an annotation changed in "
                        "review) corrects it, as session correct does, instead of refusing the file")


def add_team_parsers(ss, common):
    """Register ``push``, ``pull``, ``skip`` and ``label-config`` on the ``session``
    sub-parsers ``ss`` (``common(p)`` adds DB, --pool, --format, --no-progress)."""
    def server(p):
        p.add_argument("--label-studio", required=True, metavar="URL", help="the Label Studio server, e.g. "
                       "http://localhost:8080")
        p.add_argument("--project", required=True, type=int, metavar="ID", help="the project's id (in its URL)")
        p.add_argument("--token", default=None, help="API token (default: $LABEL_STUDIO_API_KEY)")

    p = ss.add_parser("push", help="create the open batch's tasks in a Label Studio project (once)")
    common(p)
    server(p)
    add_task_content_args(p)
    p.add_argument("--n", type=int, default=50, help="batch size when a new batch is drawn (default 50)")

    p = ss.add_parser("pull", help="ingest the finished annotations of a Label Studio project")
    common(p)
    server(p)
    add_label_reading_args(p)
    p.add_argument("--skip-cancelled", action="store_true",
                   help="record the open batch's items that every annotator skipped as impossible to label")
    add_correct_arg(p)

    p = ss.add_parser("skip", help="record items of the open batch that nobody can label")
    common(p)
    p.add_argument("items", nargs="+", help="item ids (the batch's item column)")
    p.add_argument("--reason", default=None, help="why (kept in the session file)")

    p = ss.add_parser("correct", help="change labels already accepted (what arrived stays in the file)")
    common(p)
    p.add_argument("pairs", nargs="*", metavar="ITEM LABEL", help="an item id and its correct label, repeated")
    p.add_argument("--file", default=None, metavar="FILE",
                   help="the corrected labels in a file, read as session ingest reads one (CSV, JSONL, Label "
                        "Studio export); a stochastic oracle's session: a draw column names the draw corrected")
    p.add_argument("--label-map", default=None, help="choice strings -> labels, e.g. negative=0,positive=1")
    p.add_argument("--reason", default=None, help="why (kept in the session file with each correction)")

    p = ss.add_parser("label-config", help="print the Label Studio labeling configuration matching pushed tasks")
    common(p)
    add_task_content_args(p, preannotate=False)


def _open(args, bar):
    s = open_session(args, bar)
    bar.done()
    return s


def _cmd_label_config(args, bar):
    from . import labelstudio

    s = _open(args, bar)
    try:
        cfg = labelstudio.label_config(s, args.fields, args.show_score, args.from_name)
    finally:
        s.close()
    if args.format == "json":
        print_json({"label_config": cfg})
    else:
        sys.stdout.write(cfg)
    return 0


def _cmd_push(args, bar):
    from . import labelstudio
    from .errors import UsageError

    if args.n < 1:
        raise UsageError(f"--n must be a positive integer, got {args.n}")
    labelstudio.require(args.label_studio, args.token)  # the extra and the token, before the replay
    s = _open(args, bar)
    try:
        out = labelstudio.push(s, args.label_studio, args.project, args.token, args.n, args.fields, args.show_score,
                               args.preannotate, args.from_name)
    finally:
        s.close()
    if args.format == "json":
        print_json(out)
        return 0
    where = f"project {args.project} at {args.label_studio}"
    if not out["items"]:
        print(f"no item left to label (nothing pushed to {where})")
    elif out["created"]:
        print(f"pushed {out['created']} task(s) of stage {out['stage']} to {where}"
              + (f" ({out['existing']} already there)" if out["existing"] else "")
              + f"; task data: {', '.join(out['task_data'])}")
    else:
        print(f"the {out['items']} task(s) of stage {out['stage']} are already in {where}; nothing pushed "
              f"(pull when they are annotated: bayes-eval session pull {shlex.quote(args.db)} --label-studio "
              f"{shlex.quote(args.label_studio)} --project {shlex.quote(str(args.project))})")
    return 0


def _cmd_pull(args, bar):
    from . import labelstudio

    if not args.resolve.strip():
        from .errors import UsageError

        raise UsageError("--resolve needs a rule: error, majority, ground-truth, first or an annotator's email")
    labelstudio.require(args.label_studio, args.token)
    s = _open(args, bar)
    try:
        check_skip_cancelled(args, s)
        info = labelstudio.pull(s, args.label_studio, args.project, args.token, args.resolve.strip(),
                                args.from_name, args.label_map, args.skip_cancelled, args.correct)
        pending = s.n_pending
    finally:
        s.close()
    if args.format == "json":
        print_json({**info, "pending": pending})
        return 0
    r = info["result"]
    parts = []
    if r is None:
        parts.append("no finished annotations yet")
    elif r.already_ingested and not r.n_corrected:
        parts.append("these annotations were ingested before — nothing changed")
    else:
        parts.append(f"{r.n_new} new label(s)")
        parts += ingest_counts(r, args.resolve)
    if r is not None and r.n_corrected:
        parts.append(f"{r.n_corrected} label(s) corrected (annotations changed since they were ingested)")
    if info.get("other_session_tasks"):
        parts.append(f"{info['other_session_tasks']} task(s) of another session left alone")
    if info["unannotated"]:
        parts.append(f"{info['unannotated']} task(s) not annotated yet")
    if info["cancelled"]:
        sk = info.get("cancelled_of_skipped") or 0
        parts.append(f"{info['cancelled']} skipped/cancelled annotation(s) not ingested"
                     + (f" ({'all' if sk == info['cancelled'] else sk} of items recorded as skipped)" if sk else ""))
    if info.get("empty_items"):
        e = info["empty_items"]
        parts.append(f"{len(e)} item(s) with an annotation submitted without a choice, not a label "
                     f"({', '.join(e[:5])}{' ...' if len(e) > 5 else ''})")
    state = ""
    if r is not None and r.stage_closed:
        state = f"; stage {r.stage} complete, estimate updated"
    if info["skip"] is not None and info["skip"].stage_closed:
        state = f"; stage {info['skip'].stage} complete, estimate updated"
    print(f"pulled {info['tasks']} task(s) from project {args.project}: {', '.join(parts)}{state}"
          + (f"; {pending} label(s) still missing in the open batch" if pending else ""))
    gone = info.get("missing_tasks") or []
    if gone:
        print(f"{len(gone)} item(s) of the open batch have no task in project {args.project} (deleted there?): "
              f"{', '.join(gone[:10])}{' ...' if len(gone) > 10 else ''}; session push puts them back")
    for line in (skipped_by_everyone_line(args.db, info["cancelled_items"], info["skip"], "pull"),
                 resolve_unused_line(args.resolve, s.oracle)):
        if line:
            print(line)
    return 0


def _item_ids(s, values) -> list:
    """Item ids typed on the command line, as the pool holds them (integers where its ids are)."""
    ids = s.pool.ids
    if getattr(ids, "dtype", None) is not None and ids.dtype.kind in "iu":
        return [int(v) if v.lstrip("+-").isdigit() else v for v in values]
    return list(values)


def _cmd_skip(args, bar):
    s = _open(args, bar)
    try:
        r = s.skip(_item_ids(s, args.items), reason=args.reason)
    finally:
        s.close()
    if args.format == "json":
        print_json(r)
        return 0
    parts = [f"skipped {r.n_new} item(s)"] + ([f"{r.n_already} skipped before"] if r.n_already else [])
    state = (f"stage {r.stage} complete, estimate updated" if r.stage_closed
             else f"{r.pending} label(s) still missing in the open batch" if r.pending else "")
    print(f"{', '.join(parts)}; {r.skipped} item(s) skipped in the session"
          + (f"; {state}" if state else "")
          + f"; the estimate is of the measure on the items that can be labeled (see {os.path.basename(args.db)} "
            f"status)")
    return 0


def _cmd_correct(args, bar):
    from . import annotate
    from .errors import UsageError

    pairs = list(args.pairs)
    if len(pairs) % 2:
        raise UsageError(f"session correct: give item and label in pairs (ITEM LABEL ...); got {len(pairs)} "
                         f"value(s) -- nothing was changed")
    if not pairs and args.file is None:
        raise UsageError("session correct: nothing to correct: give ITEM LABEL pairs or --file FILE -- nothing was "
                         "changed")
    s = _open(args, bar)
    try:
        items, labels = _item_ids(s, pairs[0::2]), pairs[1::2]
        where = [f"pair {i + 1} (item {v!r})" for i, v in enumerate(items)]
        draws = [None] * len(items)
        if args.file is not None:
            recs = annotate.read_labels(args.file, id_column=getattr(s.pool, "id_column", None))
            items, labels, draws = items + list(recs.items), labels + list(recs.labels), draws + list(recs.draws)
            where = where + list(recs.where)   # each names its file and line
        r = s.correct(items, labels, reason=args.reason, label_map=args.label_map, where=where,
                      draws=draws if s.oracle == "stochastic" and any(d is not None for d in draws) else None)
    finally:
        s.close()
    if args.format == "json":
        print_json(r)
        return 0
    parts = [f"corrected {r.n_changed} label(s)"] + ([f"{r.n_same} already so"] if r.n_same else [])
    print(f"{', '.join(parts)}; {r.corrections} correction(s) in the session"
          + ("; the estimates and intervals use them now, the design from the next stage it closes; the labels as "
             "they arrived are kept (session report lists each change in corrections.csv)" if r.n_changed else ""))
    return 0


TEAM_COMMANDS = {"push": _cmd_push, "pull": _cmd_pull, "skip": _cmd_skip, "correct": _cmd_correct,
                 "label-config": _cmd_label_config}
