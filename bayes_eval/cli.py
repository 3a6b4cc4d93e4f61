"""The ``bayes-eval`` command line.

    bayes-eval demo                         # a short labeling run on the built-in pool
    bayes-eval simulate POOL --measure f1 --design ais --budget 2000 --repeats 100 --format json

The commands, flags and JSON keys documented in README.md are a stable interface:
extend, never rename.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

__all__ = ["main", "build_parser", "measure_from_args", "load_pool", "check_args", "check_system",
           "add_pool_reading_args", "read_pool"]

from .errors import PoolError, SessionError, UsageError as CLIError, cli_message  # noqa: E402
from .registry import load_pool, measure_from_args  # noqa: E402,F401  (re-exported)
from .results import BAYES_STOP_INTERVALS, SESSION_BAYES_DRAWS, SIMULATION_BAYES_DRAWS, STOP_INTERVALS  # noqa: E402
from .session_cli import add_pool_reading_args, jsonable, pool_columns, read_pool  # noqa: E402,F401  (shared with sessions)


def _add_design_args(p):
    from .models.registry import oracle_model_names
    from .registry import design_names

    p.add_argument("--design", default="ais", help=f"{', '.join(design_names())} (default: ais)")
    p.add_argument("--model", default="auto",
                   help=f"oracle model for ais / poisson-adaptive: auto (default: the Dirichlet tree; a Beta per "
                        f"stratum where the scores fill two strata), {', '.join(oracle_model_names())}")
    p.add_argument("--depth", type=int, default=8, help="depth of the Dirichlet tree (1 = flat)")
    p.add_argument("--branching", type=int, default=None, help="branching of the tree (default: smallest that fits)")
    p.add_argument("--strata", type=int, default=256, help="number of score strata K (default 256)")
    p.add_argument("--eps", type=float, default=1e-3, help="ε_0 of the AIS proposal floor (relative)")
    p.add_argument("--oracle", default="deterministic", choices=["deterministic", "stochastic"])
    p.add_argument("--lam", type=float, default=0.9, help="λ-mixing toward 1/C for static IS (000 eq. 13)")
    p.add_argument("--delta", type=float, default=0.0,
                   help="AIS: mix δ of p(x) into every proposal, for reusing the labels for other measures (001 §3.3.1); "
                        "also an audit share of the low-score region: on rare-positive pools it costs 2-4.5x the MSE "
                        "for a 9-12%% narrower Bayesian interval (benchmarks/results/interval_audit.md)")
    p.add_argument("--audit-floor", type=float, default=0.01,
                   help="AIS: the least share of each proposal's mass kept on unlabeled items (0: off); where the "
                        "model is sure the unlabeled items hold nothing (a big tie at the lowest score) the rest "
                        "of the budget audits them instead of stalling (benchmarks/results/audit_floor.md)")
    p.add_argument("--strength", type=float, default=1.0, help="AIS: weight of the classifier's scores in the model prior")
    p.add_argument("--companion", default="auto", choices=["auto", "calibrated", "none"],
                   help="ais / poisson-adaptive: companion model mixed into the proposals (auto: the calibrated "
                        "model on binary pools; none: the Dirichlet tree alone, as in 001)")


# ------------------------------------------------------------------------------ option values
def _num(v):
    return f"{v:g}" if isinstance(v, float) else str(v)


_FINITE = math.isfinite
#: flag -> (test, what it must be); checked on every command that has the flag, before anything runs
_RULES = {
    "n": (lambda v: v >= 1, "a positive integer"),
    "batch": (lambda v: v >= 1, "a positive integer"),
    "budget": (lambda v: v >= 1, "a positive integer"),
    "repeats": (lambda v: v >= 1, "a positive integer"),
    "strata": (lambda v: v >= 1, ">= 1"),
    "depth": (lambda v: v >= 1, ">= 1 (1 = a flat model)"),
    "branching": (lambda v: v is None or v >= 2, ">= 2"),
    "eps": (lambda v: _FINITE(v) and 0 < v <= 1, "in (0, 1]"),
    "lam": (lambda v: _FINITE(v) and 0 <= v <= 1, "in [0, 1]"),
    "delta": (lambda v: _FINITE(v) and 0 <= v < 1, "in [0, 1)"),
    "audit_floor": (lambda v: v is None or (_FINITE(v) and 0 <= v < 1), "in [0, 1)"),
    "strength": (lambda v: _FINITE(v) and v >= 0, ">= 0"),
    "beta": (lambda v: _FINITE(v) and v > 0, "> 0"),
    "thresholds": (lambda v: v is None or v >= 2, ">= 2"),
    "system": (lambda v: isinstance(v, str) or v >= 0, ">= 0"),     # session new's: session_cli.parse_system
    "seed": (lambda v: 0 <= v < 2**63, "a non-negative integer"),
    "level": (lambda v: _FINITE(v) and 0 < v < 1, "in (0, 1)"),
    "target_width": (lambda v: v is None or (_FINITE(v) and v > 0), "> 0"),
    "stop_width": (lambda v: v is None or (_FINITE(v) and v > 0), "> 0"),
    "bayes_draws": (lambda v: v >= 40, ">= 40 (a 95% interval's tails need draws)"),
    "threshold": (lambda v: v is None or _FINITE(v), "a finite number"),
}


def check_args(args):
    """Every option value of the command, checked before anything is read or run: a
    :class:`~bayes_eval.errors.UsageError` naming the flag (``--eps must be in (0, 1],
    got -1``)."""
    for dest, (test, text) in _RULES.items():
        if not hasattr(args, dest):
            continue
        v = getattr(args, dest)
        if not test(v):
            raise CLIError(f"--{dest.replace('_', '-')} must be {text}, got {_num(v)}")
    if getattr(args, "design", None) is not None:
        from .registry import design_names

        if args.design not in design_names():
            raise CLIError(f"--design: unknown design {args.design!r}; choose one of {', '.join(design_names())}")
    if getattr(args, "model", None) is not None:
        from .models.registry import oracle_model_names

        if args.model != "auto" and args.model not in oracle_model_names():
            raise CLIError(f"--model: unknown oracle model {args.model!r}; choose one of auto, "
                           f"{', '.join(oracle_model_names())}")
    if hasattr(args, "budget") and hasattr(args, "batch") and args.batch > args.budget:
        raise CLIError(f"--batch {args.batch} is more than --budget {args.budget}: a stage would spend past the budget")
    if hasattr(args, "checkpoints"):
        if args.checkpoints is None:   # the default: those within the budget, else the budget
            cps = [c for c in (500, 1000, 2000) if c <= args.budget] or [args.budget]
        else:
            try:
                cps = [int(c) for c in args.checkpoints.split(",") if c.strip()]
            except ValueError:
                raise CLIError(f"--checkpoints must be comma-separated integers, got {args.checkpoints!r}") from None
            if not cps or min(cps) < 1:
                raise CLIError(f"--checkpoints must be positive label counts, got {args.checkpoints!r}")
            past = [c for c in cps if c > args.budget]
            if past:
                raise CLIError(f"--checkpoints {','.join(map(str, past))}: past --budget {args.budget} (no run spends "
                               f"that many labels)")
        args.checkpoints = ",".join(str(c) for c in sorted(set(cps)))   # in order, each once
    if getattr(args, "label_map", None) is not None:
        from .annotate import parse_label_map

        try:
            parse_label_map(args.label_map)
        except SessionError as exc:
            raise CLIError(f"--label-map: {exc}") from None
    for part in (p for o in (getattr(args, "poisson_option", None) or []) for p in str(o).split(",") if p.strip()):
        if "=" not in part:
            raise CLIError(f"--poisson-option expects KEY=VALUE, got {part.strip()!r}")
        k, v = (t.strip() for t in part.split("=", 1))
        if k in ("poisson_eps", "defensive", "em_iters"):
            try:
                x = float(v)
            except ValueError:
                raise CLIError(f"--poisson-option {k}: not a number: {v!r}") from None
            if not _FINITE(x) or x < 0 or (k == "em_iters" and (x < 1 or x != int(x))):
                raise CLIError(f"--poisson-option {k} must be " + ("a positive integer" if k == "em_iters" else
                                                                   "a finite number >= 0") + f", got {v}")


def check_system(system, pool):
    """``--system`` names one of the pool's systems (score / pred columns): the rule of
    ``session new``'s, :func:`bayes_eval.session_cli.parse_system`."""
    from .session_cli import parse_system

    parse_system(system, int(pool.preds.shape[1]))


def build_parser():
    ap = argparse.ArgumentParser(prog="bayes-eval", description="Label-efficient evaluation of classifiers.")
    sub = ap.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="a short labeling run on the built-in synthetic pool")
    d.add_argument("--budget", type=int, default=1000, help="labels to spend (default 1000)")
    d.add_argument("--batch", type=int, default=50, help="labels per stage (default 50)")
    d.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    d.add_argument("--measure", default="f1", help="f1 (default), precision, recall, accuracy, fbeta, pr_curve, ...")
    d.add_argument("--format", choices=["text", "json"], default="text")
    _add_design_args(d)

    s = sub.add_parser("simulate", help="repeated simulated labeling runs on a pool with known labels")
    s.add_argument("pool", help="Parquet, CSV / TSV or JSON lines file with columns score, pred, label (other names: "
                                "--score-column etc.) — or 'demo'")
    add_pool_reading_args(s)
    s.add_argument("--label-map", default=None, metavar="NAME=LABEL,...",
                   help="class names in the pool's pred / label columns -> labels, e.g. non-match=0,match=1")
    s.add_argument("--measure", default="f1", help="f1 (default), precision, recall, accuracy, fbeta, pr_curve, ...")
    s.add_argument("--beta", type=float, default=1.0, help="β of the fbeta measure (default 1)")
    s.add_argument("--thresholds", type=int, default=1024, help="grid size L for pr_curve / roc_curve / auc (default 1024)")
    s.add_argument("--system", type=int, default=0, help="which system's predictions, for a pool of several (default 0)")
    s.add_argument("--budget", type=int, default=2000, help="labels per run (default 2000)")
    s.add_argument("--batch", type=int, default=50, help="labels per stage (default 50)")
    s.add_argument("--repeats", type=int, default=100, help="simulated runs (default 100)")
    s.add_argument("--seed", type=int, default=0, help="the simulation's seed (default 0)")
    s.add_argument("--checkpoints", default=None,
                   help="comma-separated label counts at which to report, each reached at the first stage end at or "
                        "past it (default 500,1000,2000, those within --budget, else the budget)")
    s.add_argument("--format", choices=["text", "json"], default="text")
    s.add_argument("--bayes", choices=["auto", "yes", "no"], default="auto",
                   help="Bayesian intervals at the checkpoints (auto: for every design; under a stochastic "
                        "oracle the posterior of the oracle's expected answer, its labels counted as observations)")
    s.add_argument("--stop-width", type=float, default=None, metavar="W",
                   help="a scripted stopping rule: each run stops at the first stage end where the interval "
                        "(--stop-interval) is at most W wide; the output gains a 'stopping' block (share stopped, "
                        "coverage at the stop, labels at the stop)")
    s.add_argument("--stop-interval", choices=["auto", *STOP_INTERVALS],
                   default="auto",
                   help="the interval the stopping rule looks at: auto (default: the rule session status "
                        "--target-width uses -- read-first for every design under the deterministic "
                        "oracle, unless --bayes no; else clt-cs), read-first (at each stage end the interval "
                        "session status reads first: clt-cs where the CLT check passes, else bayes-checked with ais, "
                        "bayes with poisson-adaptive, bayes-stable with the other designs; as "
                        "costly as bayes), clt-cs (the confidence sequence, valid "
                        "uniformly over stages, as session status --target-width --no-bayesian), clt "
                        "(the fixed-n interval), bayes (the finite-pool Bayesian interval after every stage: one "
                        "posterior per stage and run, ~40x the cost of --bayes yes at 40 stages; as session status "
                        "--target-width --bayesian with poisson-adaptive), bayes-cs (both the "
                        "Bayesian interval and the confidence sequence), bayes-stable (the Bayesian interval at "
                        "most W wide after each of the last 3 stages, as session status --target-width "
                        "--bayesian for designs other than ais and poisson-adaptive; as costly as bayes) or "
                        "bayes-checked (the Bayesian interval at most W wide where the CLT check's ratio is at most 60, as session status "
                        "--target-width --bayesian with ais)")
    s.add_argument("--posterior-model", default="calibrated",
                   help="model of the Bayesian intervals: calibrated (default; with several classes its top-class split), design, dirichlet-tree")
    s.add_argument("--bayes-draws", type=int, default=SIMULATION_BAYES_DRAWS, metavar="N",
                   help=f"posterior draws per Bayesian interval (default {SIMULATION_BAYES_DRAWS}; a session uses "
                        f"{SESSION_BAYES_DRAWS}). The "
                        "Bayesian interval (highest-density; equal-tailed with several classes) spans 0.95(N+1) draw spacings, so it holds on average 95%% "
                        "of the posterior's mass for any N; more draws make each interval less noisy, and the "
                        "cost of the Bayesian intervals grows with N. --stop-width stops at the first narrow one, so "
                        f"with few draws also where one came out narrow by chance: {SESSION_BAYES_DRAWS} for the session's rule")
    _add_design_args(s)
    s.add_argument("--poisson-size", default="random", choices=["random", "exact", "pareto", "sequential"],
                   help="Poisson designs: random-size rounds (true Poisson sampling, mean = the batch; default) or "
                        "exactly the batch (exact = pareto: Pareto sampling; sequential: sequential Poisson "
                        "sampling; poisson-adaptive only)")
    s.add_argument("--poisson-option", action="append", default=None, metavar="KEY=VALUE",
                   help="further Poisson design settings (repeatable): estimator=ht|difference, form=sqrt|linear|"
                        "moment:g, weights=equal|linear|quadratic|precision|power:k, variance=labeled+ht|ht|labeled|"
                        "model, poisson_eps=..., defensive=..., defensive_form=..., interval=normal|beta")

    from .session_cli import add_session_parser
    from .ondemand_cli import add_ondemand_parser
    from .subsampled_cli import add_subsampled_parser

    add_session_parser(sub)
    add_ondemand_parser(sub)
    add_subsampled_parser(sub)
    return ap


def _design_kw(args):
    kw = dict(n_strata=args.strata, depth=args.depth, branching=args.branching, model=args.model,
              lam=args.lam, eps=args.eps, companion=args.companion)
    if args.design in ("ais", "is"):
        kw["oracle"] = args.oracle
    if args.design == "ais":
        kw["eps0"] = args.eps
        kw["delta"] = args.delta
        kw["audit_floor"] = args.audit_floor
        kw["strength"] = args.strength
    if args.design in ("poisson", "poisson-adaptive") and hasattr(args, "poisson_size"):
        kw.pop("eps")  # the AIS floor; Poisson designs take poisson_eps
        kw["strength"] = args.strength
        kw["oracle"] = args.oracle  # refused unless deterministic: Poisson designs label distinct items
        size = {"random": None, "exact": "pareto"}.get(args.poisson_size, args.poisson_size)
        if size is not None:
            kw["fixed_size"] = size
        floats = ("poisson_eps", "defensive")
        for part in args.poisson_option or []:
            if "=" not in part:
                raise CLIError(f"--poisson-option expects KEY=VALUE, got {part!r}")
            k, v = (t.strip() for t in part.split("=", 1))
            if k not in ("estimator", "form", "weights", "variance", "defensive_form", "interval") + floats:
                raise CLIError(f"--poisson-option: unknown setting {k!r}")
            try:
                kw[k] = float(v) if k in floats else v
            except ValueError:
                raise CLIError(f"--poisson-option {k}: not a number: {v!r}") from None
    return kw


def _companion_of(args, pool):
    from .designs import resolve_companion

    return resolve_companion(args.companion, pool.n_classes, args.design)


def _no_truth(pool) -> str:
    """Why a pool cannot be simulated on (no ground truth) and how to give it: the note of a label
    column read without (missing values), else ``--label-column`` with the pool's columns that
    could hold labels (few distinct values, fewer than the rows)."""
    from .checks import WITHOUT_TRUTH

    why = "simulation needs every item's true label (the label plays the oracle)"
    dropped = [n for n in pool.notes if WITHOUT_TRUTH in n]
    if dropped:
        return f"{why}; {dropped[0]}"
    own = pool.columns if pool.columns is not None else None
    cand = [] if own is None else [str(c) for c in own.columns
                                   if 1 < own[c].nunique() <= max(2 * pool.n_classes, 10) < len(own)]
    return (f"{why}: a 'label' column, or --label-column NAME for the column that holds them"
            + (f" (candidates: {', '.join(cand)})" if cand else
               f" (the pool's other columns: {', '.join(map(str, own.columns))})" if own is not None and len(own.columns)
               else ""))


def stop_interval_of(spec, oracle: str, bayes: str) -> str:
    """``--stop-interval auto``: the rule ``session status --target-width`` applies to a
    session of the same design -- ``read-first`` (the confidence sequence where the CLT check
    passes, else the Bayesian rule of :func:`bayes_eval.results.bayes_stop_rule`) where the session has
    a posterior (every design since stop 73, either oracle since stop 75: ``Session.posterior``)
    and the Bayesian interval is not turned off (``--bayes no``, the session's ``--no-bayesian``),
    else the confidence sequence (issue 15, item 3: "default: the one session status
    --target-width uses").  ``spec``: the design's, kept for callers (every design alike now)."""
    return "read-first" if bayes != "no" else "clt-cs"


def cmd_simulate(args):
    from .simulate import run_simulation, summarize

    pool = read_pool(args.pool, args.score_kind, args.threshold, id_column=args.id_column, columns=pool_columns(args),
                     label_map=args.label_map, n_classes=args.classes)
    if args.format != "json":
        for note in pool.notes:
            print(f"{args.pool}: {note}", file=sys.stderr)
    check_system(args.system, pool)
    if pool.labels is None:
        raise CLIError(f"{args.pool}: {_no_truth(pool)}")
    measure = measure_from_args(args.measure, pool, args.thresholds, args.beta, args.system)
    checkpoints = [int(c) for c in args.checkpoints.split(",") if c.strip()]  # checked by check_args
    from .registry import design_spec

    spec = design_spec(args.design)
    # auto: where a session of the design offers the Bayesian interval: every design, either oracle
    # (a stochastic oracle's labels are observations: posterior.complete_pool_draws)
    bayes = {"yes": True, "no": False, "auto": True}[args.bayes]
    if args.stop_interval == "auto":
        args.stop_interval = stop_interval_of(spec, args.oracle, args.bayes)
    bayes_stages = args.stop_width is not None and args.stop_interval in (*BAYES_STOP_INTERVALS, "read-first")
    if bayes_stages and not bayes:
        raise CLIError(f"--stop-interval {args.stop_interval} needs the Bayesian interval: "
                       + "drop --bayes no")
    res, cells = run_simulation(pool, measure, args.design, budget=args.budget, batch=args.batch,
                                repeats=args.repeats, seed=args.seed, checkpoints=checkpoints,
                                bayes=bayes or bayes_stages, posterior_model=args.posterior_model,
                                bayes_draws=args.bayes_draws, bayes_stages=bayes_stages, system=args.system,
                                **_design_kw(args))
    from .designs import resolve_oracle_model     # --model auto: the model AIS took on this pool

    summary = summarize(res)
    tv = res.true_value
    out = {
        "pool": args.pool,
        "n_items": pool.n_items,
        "measure": args.measure,
        "components": list(res.names),
        "true_value": float(tv[0]) if tv.size == 1 else tv.tolist(),
        "design": args.design,
        "model": resolve_oracle_model(args.model, cells, args.strata) if args.design == "ais" else None,
        "depth": args.depth if args.design == "ais" else None,
        "companion": _companion_of(args, pool),
        "audit_floor": args.audit_floor if args.design == "ais" and args.oracle == "deterministic" else None,
        "oracle": args.oracle,
        "budget": args.budget,
        "batch": args.batch if res.design != "oasis" else 1,
        "repeats": args.repeats,
        "seed": args.seed,
        "n_cells": cells.n_cells,
        "seconds": res.seconds,
        "compile_seconds": res.compile_seconds,
        "seconds_per_run": res.seconds / args.repeats,
        "bayes_seconds": res.bayes_seconds,
        "posterior_model": args.posterior_model if res.bayes_lower is not None else None,
        "bayes_draws": res.bayes_draws,     # None without Bayesian intervals
        "stalled_runs": int(res.stalled.sum()),
        "checkpoints": summary,
    }
    if args.stop_width is not None:
        from .results import stopping

        out["stopping"] = stopping(res, args.stop_width, args.stop_interval)   # "bayes_draws" where Bayesian
    if args.format == "json":
        print(json.dumps(jsonable(out), indent=2))
    else:
        print(f"{pool!r}: true {args.measure} = {np.array2string(tv, precision=4)}")
        print(f"design {args.design}, {args.repeats} repeats: {res.seconds:.2f} s "
              f"(+{res.compile_seconds:.1f} s compile), {res.seconds / args.repeats * 1000:.1f} ms per run")
        hb = res.bayes_lower is not None
        print(f"{'labels':>7} {'mean':>9} {'bias':>10} {'mse':>10} {'coverage':>9} {'width':>8} {'undef':>6}"
              + (f" {'cov_bayes':>9} {'w_bayes':>8}" if hb else ""))
        for c in summary:
            def avg(v, f=lambda a: a):   # over a curve's components defined in some run
                return v if not isinstance(v, list) else float(np.nanmean(f(np.array(v, dtype=float))))
            mean, bias = avg(c["mean"]), avg(c["bias"], np.abs)
            if c["mse"] is None:
                print(f"{c['labels']:>7} {'-':>9} {'-':>10} {'-':>10} {'-':>9} {'-':>8} {c['undefined_runs']:>6}")
                continue
            extra = ""
            if hb and c.get("coverage_bayes") is not None:
                extra = f" {c['coverage_bayes']:>9.2f} {c['mean_width_bayes']:>8.4f}"
            print(f"{c['labels']:>7} {mean:>9.4f} {bias:>10.2e} {c['mse']:>10.3e} {c['coverage']:>9.2f} "
                  f"{c['mean_width']:>8.4f} {c['undefined_runs']:>6}" + extra)
        if len(tv) > 1:
            print(f"(a measure of {len(tv)} components: mean, |bias|, coverage and widths are averaged over them, "
                  f"mse is per run; --format json gives each component's mean, bias and coverage)")
        if out["stalled_runs"]:
            short = [c for c in summary if c["mean_labels"] < c["labels"] - 1e-9]
            matter = _items_that_matter(measure, pool)
            why = (f"the pool has only {pool.n_items:,} items and a deterministic oracle labels each once"
                   if args.oracle == "deterministic" and args.budget > pool.n_items
                   else f"every item {args.measure} counts is labeled: {matter:,} have a non-zero loss at some label, "
                        f"so the estimate is exact once they are" if args.oracle == "deterministic"
                   and summary[-1]["mean_labels"] >= matter - 0.5
                   else "the proposal puts almost no mass on the items left")
            then = ("so fewer labels were spent than the checkpoints say; labels spent on average at "
                    + ", ".join(f"{c['labels']}: {c['mean_labels']:.0f}" for c in short) if short else
                    f"after the last checkpoint ({summary[-1]['labels']}), which every run reached; "
                    f"the budget of {args.budget} was not spent")
            print(f"{out['stalled_runs']} of {args.repeats} runs stalled: a stage reached its draw cap before "
                  f"finding enough unlabeled items ({why}), {then}")
        if any("coverage_cs" in c for c in summary):
            print("confidence sequence (valid at every stage): coverage / mean width at "
                  + ", ".join(f"{c['labels']}: {c['coverage_cs']:.2f} / {c['mean_width_cs']:.4f}"
                              for c in summary if "coverage_cs" in c))
        if "stopping" in out:
            from .results import STOP_CHECK_MAX

            st = out["stopping"]
            bayes_half = {"bayes-checked": "the Bayesian interval where the CLT check's ratio is at most "
                                           f"{STOP_CHECK_MAX:g}",
                          "bayes-stable": "the Bayesian interval after each of the last 3 stages",
                          "bayes": "the Bayesian interval"}
            rule = ({"read-first": "read-first: the confidence sequence where the CLT check passes, else "
                                   + bayes_half.get(st.get("bayes_rule"), "the Bayesian interval")}
                    .get(st["interval"], st["interval"]))
            line = (f"stopping at width <= {st['width']:g} ({rule}): {st['stopped']:.0%} of runs stopped "
                    "within the budget")
            if st["coverage"] is not None:
                line += (f"; coverage at the stop {st['coverage']:.3f} (± {st['coverage_se']:.3f}), "
                         f"{st['mean_labels']:.0f} labels on average")
            print(line)
            if st.get("bayes_draws") is not None and st["bayes_draws"] < SESSION_BAYES_DRAWS:
                print(f"  (each Bayesian interval from {st['bayes_draws']} posterior draws, a session's from "
                      f"{SESSION_BAYES_DRAWS}: with fewer draws some intervals come out narrow by chance and the rule "
                      f"stops on them; --bayes-draws {SESSION_BAYES_DRAWS} for the session's rule)")
    return 0


def _items_that_matter(measure, pool) -> int:
    """Items with a non-zero loss at some label: the only ones a design for the measure draws
    (once each is labeled, a deterministic oracle's estimate is exact)."""
    return int(np.any(np.asarray(measure.loss(pool.features())) != 0, axis=(1, 2)).sum())


def cmd_demo(args):
    from .pool import demo_pool
    from .simulate import run_simulation

    pool = demo_pool()
    measure = measure_from_args(args.measure, pool)
    res, cells = run_simulation(pool, measure, args.design, budget=args.budget, batch=args.batch, repeats=1,
                                seed=args.seed, checkpoints=(args.budget,),
                                bayes=pool.n_classes == 2, **_design_kw(args))
    blo = bhi = bmean = None
    if res.bayes_lower is not None:
        blo, bhi = float(res.bayes_lower[0, -1, 0]), float(res.bayes_upper[0, -1, 0])
        bmean = float(res.bayes_mean[0, -1, 0])  # the posterior mean
    from .results import MIN_CLASS_LABELS, cs_bounds

    h = res.history
    truth = res.true_value[0]
    shown = measure.names[0]      # the component the demo reports
    cs_lo, cs_hi = cs_bounds(h.value[0, :, :1], h.lower[0, :, :1], h.upper[0, :, :1], h.n_draws[0][:, None],
                             sd=h.sd[0, :, :1], feasible=h.feasible[0, :, :, :1])
    cs_lo, cs_hi = cs_lo[:, 0], cs_hi[:, 0]
    enough = np.all(h.n_class[0] >= MIN_CLASS_LABELS, axis=-1)
    rng_ = res.bounds[0]  # the measure's range (results.measure_bounds): F1 above 1 is impossible

    def clip(v):
        return float(np.clip(v, *rng_))

    from .estimators import MODEL_CHECK_MAX

    rows = []
    for t in range(h.n_labels.shape[1]):
        chk = float(h.check[0, t, 0]) if h.check is not None else float("nan")
        rows.append(dict(labels=int(h.n_labels[0, t]), draws=int(h.n_draws[0, t]), estimate=float(h.value[0, t, 0]),
                         lower=clip(h.lower[0, t, 0]), upper=clip(h.upper[0, t, 0]),
                         cs_lower=clip(cs_lo[t]) if enough[t] else None,
                         cs_upper=clip(cs_hi[t]) if enough[t] else None,
                         clt_check=chk if np.isfinite(chk) else None,
                         clt_reliable=bool(chk <= MODEL_CHECK_MAX) if not np.isnan(chk) else None,
                         # what the labels allow (bayes_eval.feasible): F1 over every completion of the pool
                         feasible_lower=float(h.feasible[0, t, 0, 0]), feasible_upper=float(h.feasible[0, t, 1, 0])))
    if args.format == "json":
        print(json.dumps(jsonable({"pool": "demo", "n_items": pool.n_items, "measure": args.measure,
                                    "design": args.design, "component": shown, "n_components": len(measure.names),
                                    "true_value": truth, "stages": rows,
                                    "bayes_interval": [blo, bhi] if blo is not None else None,
                                    "bayes_mean": bmean,
                                    "cs_interval": [rows[-1]["cs_lower"], rows[-1]["cs_upper"]]}), indent=2))
        return 0
    print(f"bayes-eval demo: estimating {args.measure} of a classifier on a synthetic pool of "
          f"{pool.n_items:,} items ({int(pool.labels.sum())} positives), labeling {args.budget} of them "
          f"with design '{args.design}'")
    print("\n".join(demo_truth_lines(args.measure, measure.names, truth)) + "\n")
    print(f"{'labels':>7} {'estimate':>9}   {'95% confidence sequence':<24} {'95% CLT interval (fixed budget)':<32} "
          f"CLT check")
    step = max(1, len(rows) // 10)
    shown_at = None
    for i, r in enumerate(rows):
        if r["labels"] == shown_at:
            continue   # a stage that found nothing new (the design has no item left): its row repeats the last
        # a run of equal labels (a stall) shows once, where it begins
        stall = i + 1 < len(rows) and rows[i + 1]["labels"] == r["labels"]
        if (i + 1) % step == 0 or i == len(rows) - 1 or stall:
            shown_at = r["labels"]
            est = "undefined" if not np.isfinite(r["estimate"]) else f"{r['estimate']:.4f}"
            ci = "" if not np.isfinite(r["lower"]) else f"[{r['lower']:.4f}, {r['upper']:.4f}]"
            cs = "undefined" if r["cs_lower"] is None else f"[{r['cs_lower']:.4f}, {r['cs_upper']:.4f}]"
            chk = ("" if r["clt_reliable"] is None else
                   "passed" if r["clt_reliable"] else
                   "fails (" + ("unbounded" if r["clt_check"] is None else f"{r['clt_check']:.0f}×") + ")")
            print(f"{r['labels']:>7} {est:>9}   {cs:<24} {ci:<32} {chk}")
    last = rows[-1]

    def holds(lo, hi):
        return "holds the truth" if lo is not None and lo <= truth <= hi else "misses the truth"

    est_last = (f"{last['estimate']:.4f}" if np.isfinite(last["estimate"])
                else "undefined (the items drawn do not define it yet)")
    print(f"\nlabels spent: {last['labels']} of {pool.n_items:,} items; estimate {est_last}")
    if last["labels"] < args.budget and args.oracle == "deterministic":
        # the design ran out of items: every item the measure counts labeled, or a proposal with no mass left
        matter = _items_that_matter(measure, pool)
        print(f"  every item {args.measure} counts is labeled ({matter:,}: a non-zero loss at some label), so the "
              f"estimate is exact; the other {args.budget - last['labels']:,} labels of the budget were not spent"
              if last["labels"] >= matter else
              f"  the design stopped after {last['labels']} labels: its proposal puts almost no mass on the items "
              f"left (the other {args.budget - last['labels']:,} labels of the budget were not spent)")
    if blo is not None:
        what = "posterior of the expected answer" if args.oracle == "stochastic" else "finite-pool posterior"
        print(f"  95% Bayesian interval     [{blo:.4f}, {bhi:.4f}]  {what} (calibrated model; "
              f"mean {bmean:.4f}): {holds(blo, bhi)}")
    if last["cs_lower"] is not None:
        print(f"  95% confidence sequence   [{last['cs_lower']:.4f}, {last['cs_upper']:.4f}]  for stopping (where a CLT holds): "
              f"{holds(last['cs_lower'], last['cs_upper'])}")
    if np.isfinite(last["lower"]) and np.isfinite(last["upper"]):
        print(f"  95% CLT interval          [{last['lower']:.4f}, {last['upper']:.4f}]  fixed budget, for comparison: "
              f"{holds(last['lower'], last['upper'])}")
    else:
        print("  95% CLT interval          undefined  (no estimate yet to centre it on)")
    if np.isfinite(last["feasible_lower"]) and np.isfinite(last["feasible_upper"]):
        print(f"  labels allow              [{last['feasible_lower']:.4f}, {last['feasible_upper']:.4f}]  {shown} over "
              f"every completion of the pool: no model, no CLT (the estimate is kept inside, the CLT-based intervals "
              f"cut to it)")
    print(f"truth    {truth:.4f}  (known here because the demo pool is synthetic)")
    if blo is not None and np.isfinite(last["estimate"]) and not blo <= last["estimate"] <= bhi:
        print(f"The estimate ({last['estimate']:.4f}) lies outside the Bayesian interval: it rests on the items drawn, "
              f"the posterior (mean {bmean:.4f}) also on "
              + ("the calibration curve where the draws are few." if args.oracle == "stochastic" else
                 "the items nobody labeled."))
    if blo is None:   # no posterior (several classes): nothing to point to
        print("On this pool some positives score as low as the negatives, where few items are drawn: the CLT-based "
              "intervals rest on the positives found and may miss.")
    elif args.design == "ais" and args.measure == "f1":
        print(demo_record_text(args.oracle))
    else:
        print("On this pool some positives score as low as the negatives, where few items are drawn: the CLT-based "
              "intervals rest on the positives found, the Bayesian interval also accounts for the unlabeled items "
              "(coverage over repeated runs: bayes-eval simulate demo --design DESIGN --bayes yes).")
    if last.get("clt_reliable") is not None:
        print("CLT check (the calibrated model's variance ÷ the draws'; above 5× the CLT-based intervals are not "
              "reliable): " + ("passed" if last["clt_reliable"] else
                               "fails — positives may hide where the design draws few items"))
    return 0


# What AIS's 1000-label runs on the demo pool measured, quoted by `bayes-eval demo` (F1 at 1000
# labels; coverage of the CLT interval, the confidence sequence and the Bayesian interval over
# `runs` runs of `bayes-eval simulate demo --bayes yes`, in `record`): tests/test_designs_end_to_end.py
# reads them back from the record, so a rerun record that moves them fails there until they are updated.
DEMO_RECORDS = {
    "deterministic": {"record": "benchmarks/results/bayes_record/demo_ais.json", "labels": 1000, "runs": 500,
                      "clt": 0.688, "cs": 0.822, "bayes": 0.972},
    "stochastic": {"record": "benchmarks/results/stochastic_oracle/demo_ais.json", "labels": 1000, "runs": 200,
                   "clt": 0.84, "cs": 0.915, "bayes": 0.965},
}


def _percent(share: float) -> str:
    """A coverage as the demo prints it: as measured, to three significant digits (0.992 -> 99.2%)."""
    return f"{100 * share:.3g}%"


def demo_truth_lines(measure_arg: str, names, truth: float) -> list:
    """The demo's lines under its heading: the true value of the component it shows, the first of
    ``names``; for a measure of several components (a PR curve) first a line that says so and where
    every component is reported."""
    lines = []
    if len(names) > 1:   # every figure the demo prints is of the first component
        lines.append(f"({measure_arg} has {len(names):,} components; shown: the first, {names[0]}; every component: "
                     f"bayes-eval simulate demo --measure {measure_arg} --format json, or a session's status)")
    return lines + [f"(the pool's labels play the oracle; true {names[0]} = {truth:.4f})"]


def demo_record_text(oracle: str) -> str:
    """The demo's closing line on AIS's F1 on the demo pool: what the CLT-based and Bayesian intervals
    covered there over repeated runs (:data:`DEMO_RECORDS`), and which to read."""
    r = DEMO_RECORDS[oracle]
    bayes = ("the Bayesian interval (the posterior of the oracle's expected answer, every label an observation)"
             if oracle == "stochastic" else "the Bayesian interval, which accounts for the unlabeled items,")
    where = "under a stochastic oracle, " if oracle == "stochastic" else ""
    return ("On this pool some positives score as low as the negatives, where few items are drawn: the CLT-based "
            f"intervals rest on the positives found: {where}at {r['labels']} labels the CLT interval held the truth in "
            f"{_percent(r['clt'])} of {r['runs']} runs, the confidence sequence in {_percent(r['cs'])}, {bayes} in "
            f"{_percent(r['bayes'])} ({r['record']}): read the Bayesian interval here.")


def main(argv=None):
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
    # the pool's own notes (Pool.notes) say this in words where a command reads a pool; no raw warning line too
    warnings.filterwarnings("ignore", message="no score column")
    args = build_parser().parse_args(argv)
    try:
        check_args(args)  # every option value, before anything is read or run
        if args.command in ("demo", "session", "simulate"):
            from ._config import enable_compile_cache

            enable_compile_cache()
        if args.command == "simulate":
            return cmd_simulate(args)
        if args.command == "demo":
            return cmd_demo(args)
        if args.command == "session":
            from .session_cli import cmd_session

            return cmd_session(args)
        if args.command == "ondemand":
            from .ondemand_cli import cmd_ondemand

            return cmd_ondemand(args)
        if args.command == "subsampled":
            from .subsampled_cli import cmd_subsampled

            return cmd_subsampled(args)
    except (CLIError, PoolError, ValueError) as exc:
        print(f"bayes-eval: error: {cli_message(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:   # the output piped into a reader that stopped (`| head`): not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nothing more to flush at exit
        return 141
    except OSError as exc:
        from .annotate import os_problem

        print(f"bayes-eval: error: {exc.filename + ': ' if exc.filename else ''}{os_problem(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
