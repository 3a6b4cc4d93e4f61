"""``bayes-eval ondemand``: several systems evaluated on demand (seed 003, issue 17).

Importing this module is cheap (argparse only); the verbs import the library inside
:func:`cmd_ondemand`.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys

DESCRIPTION = """\
Evaluate several systems (or versions, or thresholds) as they arrive, reusing every label
(seed 003: joint precision and recall estimators with importance weights).

  bayes-eval ondemand new eval.db --epsilon 0.05       # [--protocol post-fill|post|joint]
  bayes-eval ondemand submit eval.db sysA sysA.csv      # CSV/Parquet: column item [, weight]
  bayes-eval ondemand next eval.db --out tasks.csv      # instances to verify (Label Studio compatible)
  bayes-eval ondemand ingest eval.db tasks_labeled.csv  # columns item,label (0/1); or LS JSON export
                                                        # [--label-map no=0,yes=1]
  bayes-eval ondemand add-exhaustive eval.db found.csv  # columns item,unit: instances found in a unit
  bayes-eval ondemand skip eval.db ITEM [ITEM ...]      # instances nobody can verify: estimates then
                                                        # describe the instances that can be verified
  bayes-eval ondemand status eval.db [--format json]    # precision, recall, F1 with 95% intervals
  bayes-eval ondemand report eval.db --out DIR          # CSV + PNG
  bayes-eval ondemand simulate synthetic --systems 10 --epsilon 0.05 --repeats 500 --format json
"""


def add_ondemand_parser(subparsers):
    """Register ``ondemand`` on the ``bayes-eval`` parser."""
    p = subparsers.add_parser("ondemand", help="several systems evaluated on demand (seed 003)",
                              description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="ondemand_command", metavar="VERB")
    sub.required = True
    q = sub.add_parser("new", help="create an on-demand evaluation file")
    q.add_argument("db")
    q.add_argument("--epsilon", type=float, default=0.05, help="target 95%% half-width (default 0.05)")
    q.add_argument("--cost-verify", type=float, default=0.18, help="cost of one verification (default 0.18)")
    q.add_argument("--cost-exhaustive", type=float, default=1.60,
                   help="cost of one instance found by exhaustive annotation (default 1.60)")
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--rounds", type=int, default=4, help="sizing rounds per system (default 4)")
    q.add_argument("--protocol", choices=("post-fill", "post", "joint"), default="post-fill",
                   help="how systems are sampled and estimated: post-fill (default; draws favour the "
                        "post-strata earlier systems under-sampled, post-stratified estimator), post (draws "
                        "from each system's p, post-stratified estimator) or joint (seed 003's protocol)")
    q = sub.add_parser("submit", help="submit a system's predictions; prints the verifications it needs and why")
    q.add_argument("db")
    q.add_argument("name")
    q.add_argument("file", help="CSV or Parquet: column 'item' (else the first column), optional 'weight'")
    q = sub.add_parser("next", help="write the instances awaiting verification (tops up systems first)")
    q.add_argument("db")
    q.add_argument("--out", required=True, help="tasks file: .csv, .jsonl or .json (Label Studio tasks)")
    q = sub.add_parser("ingest", help="read verifications (item,label 0/1; JSONL; Label Studio JSON export)")
    q.add_argument("db")
    q.add_argument("labels")
    q.add_argument("--from-name", default=None, help="Label Studio choice control holding the label")
    q.add_argument("--label-map", default=None, metavar="NAME=LABEL,...",
                   help="label names -> 0/1 (as session ingest's), e.g. no=0,yes=1")
    q.add_argument("--resolve", default="error", metavar="RULE",
                   help="annotators who disagree on an instance: error (default: refuse, naming them), majority, "
                        "ground-truth, first, or an annotator's email (as session ingest's)")
    q = sub.add_parser("add-exhaustive", help="instances found by exhaustive annotation (columns item,unit)")
    q.add_argument("db")
    q.add_argument("found")
    q = sub.add_parser("skip", help="record drawn instances as beyond any annotator (never sent again; the "
                                    "estimates then describe the instances that can be verified)")
    q.add_argument("db")
    q.add_argument("items", nargs="+", metavar="ITEM", help="instance ids, as in the tasks file")
    q = sub.add_parser("status", help="per system: precision, recall, F1 with intervals; pairwise differences")
    q.add_argument("db")
    q.add_argument("--format", choices=("text", "json"), default="text")
    q = sub.add_parser("report", help="CSV + PNG: estimates per system, cost against systems, simple vs joint")
    q.add_argument("db")
    q.add_argument("--out", required=True, help="folder (created if missing)")
    q = sub.add_parser("simulate", help="simulate simple vs joint on a synthetic universe or a pool file")
    q.add_argument("setting", help="'synthetic' or a pool file (.parquet/.csv with columns score, label)")
    q.add_argument("--systems", type=int, default=10)
    q.add_argument("--epsilon", type=float, default=0.05)
    q.add_argument("--repeats", type=int, default=100)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--rounds", type=int, default=4)
    q.add_argument("--protocols", default="",
                   help="comma-separated protocols to run beside simple and joint (their keys are added to the "
                        "JSON): joint_post (post-stratified, draws from each system's own predictions: the "
                        "session's 'post'), joint_post_fill (the post-fill proposal, at submission only), "
                        "joint_post_fill_session (post-fill with the session's top-ups: the session's default "
                        "'post-fill'; the session's names post-fill and post are read as these)")
    q.add_argument("--unverifiable", type=float, default=0.0, metavar="SHARE",
                   help="share of the instances nobody can verify (each drawn one is skipped, as `ondemand skip`; "
                        "the truths and estimates are then those on the verifiable instances); default 0")
    q.add_argument("--unverifiable-correct", type=float, default=None, metavar="SHARE",
                   help="the share among the correct instances, where it differs (default: --unverifiable's)")
    q.add_argument("--format", choices=("text", "json"), default="text")


def _check(args):
    from .errors import UsageError

    if getattr(args, "epsilon", 0.5) is not None and not 0 < getattr(args, "epsilon", 0.5) < 1:
        raise UsageError(f"--epsilon must be in (0, 1), got {args.epsilon}")
    for flag in ("systems", "repeats", "rounds"):
        v = getattr(args, flag, 1)
        if v is not None and v < 1:
            raise UsageError(f"--{flag} must be at least 1, got {v}")
    if not getattr(args, "resolve", "error").strip():
        raise UsageError("--resolve needs a rule: error, majority, ground-truth, first or an annotator's email")


def print_status(st, out=None):
    out = sys.stdout if out is None else out   # read at the call: a default bound at import keeps a stale stream
    cfg = st["config"]
    from .ondemand_status import counted

    print(f"epsilon {cfg['epsilon']}; labels: {counted(st['labels']['verifications'], 'verification')}, "
          f"{counted(st['labels']['exhaustive'], 'exhaustive instance')} in {counted(st['n_units'], 'unit')}; "
          f"cost ${st['cost']['total']:.2f}"
          + (f" (${st['cost']['awaiting']:.2f} of it for "
             f"{counted(round(st['cost']['awaiting'] / cfg['cost_verify']), 'verification')} awaited)"
             if st["cost"].get("awaiting") else ""), file=out)

    def fmt(iv):
        return "   —" if iv is None else f"{iv['estimate']:.3f} ± {iv['half_width']:.3f}"

    h = st.get("estimator", "joint")
    wn = max([12] + [len(str(r["name"])) + 2 for r in st["systems"]])     # a long system name keeps the columns
    print(f"{'system':<{wn}}{'draws':>7}{'new':>6}{'cost':>9}  {f'precision ({h})':<18}{f'recall ({h})':<18}"
          f"{f'F1 ({h})':<18}{'precision (simple)':<18}", file=out)
    for r in st["systems"]:
        g = (lambda m, k: r.get(m, {}).get(k) if isinstance(r.get(m), dict) else None)
        print(f"{r['name']:<{wn}}{r['draws']:>7}{r['new_verifications']:>6}{r['cost']:>9.2f}  "
              f"{fmt(g('precision', h)):<18}{fmt(g('recall', h)):<18}{fmt(g('f1', h)):<18}"
              f"{fmt(g('precision', 'simple')):<18}", file=out)
    if st.get("weighted_systems") and cfg.get("protocol", "joint") != "joint":
        print(f"estimates: 003's joint estimator, not protocol {cfg['protocol']}'s post-stratified one: "
              f"{', '.join(st['weighted_systems'])} weighted (post-strata split at every distinct weight and "
              f"cost more labels for wider intervals); later systems are drawn from their own p", file=out)
    if st.get("skipped"):
        print(f"{counted(st['skipped'], 'instance')} recorded as beyond any annotator (ondemand skip): the estimates "
              f"describe the instances that can be verified"
              + "".join(f"; {r['name']} {counted(r['skipped_draws'], 'skipped draw')}"
                        for r in st["systems"] if r.get("skipped_draws")), file=out)
    waiting = [r for r in st["systems"] if r.get("awaiting_draws")]
    if waiting:
        print("awaiting verifications: " + "; ".join(f"{r['name']} {r['awaiting_draws']} of {counted(r['draws'], 'draw')}"
                                                     for r in waiting)
              + " (a round enters the estimates once all its draws are verified: ondemand next, then ingest)",
              file=out)
    if st.get("pairs"):
        print(f"paired differences (b − a, {h}, 95%):", file=out)
        for p in st["pairs"]:
            print(f"  {p['b']} − {p['a']}: precision {fmt(p['precision'])}, recall {fmt(p['recall'])}, "
                  f"F1 {fmt(p['f1'])}", file=out)
    if st["systems"] and st["n_units"] < 2:
        print("recall and F1 need an exhaustive sample of 2 units or more: annotate whole units (documents) "
              "picked at random, list every correct instance found with its unit, and add them with "
              "`bayes-eval ondemand add-exhaustive` (columns item,unit)", file=out)
    if st.get("exhaustive_needed"):
        e = st["exhaustive_needed"]
        print(f"exhaustive instances for recall ±{cfg['epsilon']}: {h} "
              f"{e['joint'] if e['joint'] is not None else 'not reachable by exhaustive samples alone'}, "
              f"simple {e['simple']}", file=out)


def cmd_ondemand(args) -> int:
    _check(args)
    verb = args.ondemand_command
    if verb == "simulate":
        return _simulate(args)
    from .ondemand_session import OnDemand
    from .ondemand_status import counted

    if verb == "new":
        OnDemand.create(args.db, args.epsilon, args.cost_verify, args.cost_exhaustive, args.seed, args.rounds,
                        args.protocol).close()
        print(f"created {args.db} (epsilon {args.epsilon}, verification ${args.cost_verify}, "
              f"exhaustive ${args.cost_exhaustive}, protocol {args.protocol})")
        return 0
    with OnDemand.open(args.db) as ev:
        if verb == "submit":
            r = ev.submit_file(args.name, args.file)
            print(r["why"])
            if r.get("already"):   # no new draw: its verifications were asked for when it was first submitted
                print(f"{args.name}: already submitted with the same predictions (nothing changed, no new draws; "
                      f"bayes-eval ondemand next {shlex.quote(args.db)} --out tasks.csv lists whatever is still to verify)")
            else:
                print(f"{args.name}: {counted(r['new_verifications'], 'new verification')} needed now "
                      f"(bayes-eval ondemand next {shlex.quote(args.db)} --out tasks.csv)")
        elif verb == "next":
            r = ev.next(args.out)
            if r["tasks"]:
                print(f"wrote {counted(r['tasks'], 'instance')} to verify to {args.out} "
                      f"({counted(r['new_draws'], 'new draw')})")
            else:
                print("nothing to verify: every system's precision interval is within epsilon (or at its draw cap); "
                      f"{args.out} holds no task")
        elif verb == "ingest":
            r = ev.ingest(args.labels, from_name=args.from_name, label_map=args.label_map, resolve=args.resolve.strip())
            print(f"{args.labels}: already ingested (nothing changed)" if r["already"]
                  else f"ingested {r['new']} new verification(s) ({r['rows']} row(s) with a label"
                  + (f"; {r['resolved']} disagreement(s) resolved by rule {args.resolve.strip()!r}" if r["resolved"]
                     else "")
                  + (f"; {r['skipped']} row(s) without one skipped, still to verify" if r.get("skipped") else "")
                  + (f"; {r['cancelled']} skipped/cancelled annotation(s) not ingested" if r["cancelled"] else "")
                  + ")")
            if r["cancelled_items"]:
                c = r["cancelled_items"]
                print(f"every annotator skipped instance(s) {', '.join(c[:10])}{' ...' if len(c) > 10 else ''}: "
                      f"they still await a verification, and the round that drew them enters the estimates only "
                      f"once they have one (send them again with ondemand next; if nobody can verify them: "
                      f"bayes-eval ondemand skip {shlex.quote(args.db)} {' '.join(shlex.quote(x) for x in c[:10])})")
        elif verb == "add-exhaustive":
            r = ev.add_exhaustive(args.found)
            print(f"{args.found}: already ingested (nothing changed)" if r["already"]
                  else f"added {counted(r['new'], 'instance')} found in {counted(r['units'], 'unit')}")
        elif verb == "skip":
            r = ev.skip(args.items, source="command line")
            print(f"recorded {counted(r['new'], 'instance')} as beyond any annotator"
                  + (f" ({r['already']} already recorded)" if r["already"] else "")
                  + f"; {counted(r['skipped'], 'instance')} skipped in all: the estimates describe the instances "
                    f"that can be verified, and a round whose other draws are verified enters them")
        elif verb == "status":
            st = ev.status()
            if args.format == "json":
                json.dump(st, sys.stdout, indent=1)
                print()
            else:
                print_status(st)
        elif verb == "report":
            from .ondemand_report import write_report

            files = write_report(ev, args.out)
            print("wrote " + ", ".join(files))
    return 0


def _simulate(args) -> int:
    from . import ondemand_sim as sim
    from .errors import UsageError

    if args.setting == "synthetic":
        setting = sim.synthetic_setting(args.systems, seed=args.seed)
    else:
        import os

        from .tables import read_table

        if not os.path.isfile(args.setting):
            raise UsageError(f"SETTING must be 'synthetic' or a pool file; {args.setting} not found")
        frame, _, _ = read_table(args.setting, what="pool file")
        for col in ("score", "label"):
            if col not in frame.columns:
                raise UsageError(f"{args.setting}: a pool for simulate needs columns 'score' and 'label' "
                                 f"(no {col!r}; columns are {list(frame.columns)})")
        setting = sim.pool_setting(frame, args.systems, seed=args.seed,
                                   name=os.path.splitext(os.path.basename(args.setting))[0])
    for flag in ("unverifiable", "unverifiable_correct"):
        v = getattr(args, flag)
        if v is not None and not 0 <= v < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be in [0, 1), got {v}")
    if args.unverifiable or args.unverifiable_correct:
        setting = sim.with_unverifiable(setting, args.unverifiable, args.unverifiable_correct, seed=args.seed)
    # the session's protocol names (`ondemand new --protocol`) read as the protocols they run
    named = (sim.SESSION_TWIN.get(p, p) for p in (x.strip() for x in args.protocols.split(",")))
    extra = tuple(dict.fromkeys(p for p in named if p and p not in ("simple", "joint")))
    unknown = [p for p in extra if p not in sim.PROTOCOLS]
    if unknown:
        raise UsageError(f"--protocols: unknown {', '.join(unknown)}; known: {', '.join(sorted(sim.PROTOCOLS))} "
                         f"(and the session's names: {', '.join(sim.SESSION_TWIN)})")
    out = sim.summarize(sim.simulate(setting, args.epsilon, args.repeats, args.seed, rounds=args.rounds,
                                     protocols=("simple", "joint") + extra))
    if args.format == "json":
        json.dump(out, sys.stdout, indent=1)
        print()
    else:
        print(f"{out['setting']}: {args.systems} systems, epsilon {args.epsilon}, {out['repeats']} repeats, "
              f"{out['seconds']:.1f}s")
        if out["unverifiable"]:
            u = out["unverifiable"]
            print(f"{u['predicted']} predicted instances nobody can verify ({u['predicted_correct']} of them correct): "
                  f"drawn ones are skipped; the truths are those on the verifiable instances")
        print(f"cost to epsilon on every precision: simple ${out['cost']['simple']:.2f}, joint "
              f"${out['cost']['joint']:.2f} (ratio {out['cost_ratio']:.2f}); recall (exhaustive): simple "
              f"${out['cost_recall']['simple']:.2f}, joint ${out['cost_recall']['joint']:.2f}")
        for p in extra:
            print(f"  {p}: ${out['cost'][p]:.2f} (ratio {out['cost'][p] / out['cost']['simple']:.2f}), "
                  f"{out['reached'][p]:.0%} of (run, system) at epsilon at the end")
        for r in out["systems"]:
            print(f"  {r['name']:<7} precision {r['precision']['true']:.3f}: coverage simple "
                  f"{r['precision']['simple']['coverage']:.3f} joint {r['precision']['joint']['coverage']:.3f}; "
                  f"recall {r['recall']['true']:.3f}: joint {r['recall']['joint']['coverage']:.3f}; "
                  f"F1 joint {r['f1']['joint']['coverage']:.3f}")
    return 0
