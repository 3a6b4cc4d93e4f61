"""What a session is set up from: its design built by name and its measures parsed from
specs (both through :mod:`bayes_eval.registry`, the one place things are built by name),
with every default resolved so that the session file replays under later defaults.
"""
from __future__ import annotations

import os
import time

import numpy as np

from . import annotate
from . import registry
from .checks import py_scalar
from .drawing import POISSON_SIZES
from .errors import SessionError

__all__ = [
    "SESSION_DESIGNS",
    "POISSON_DESIGNS",
    "POISSON_SIZES",
    "POISSON_OPTIONS",
    "ORACLES",
    "make_design",
    "poisson_config",
    "measure_specs",
    "measure_of_spec",
    "component_names",
    "keep_empty_default",
    "session_config",
    "session_measures",
    "pool_partitions",
]

SESSION_DESIGNS = tuple(registry.design_names())
POISSON_DESIGNS = tuple(n for n in SESSION_DESIGNS if registry.design_spec(n).kind == "rounds")
#: settings of the Poisson designs a session takes in ``poisson_options`` (as
#: :func:`bayes_eval.poisson_designs.poisson_design` names them; ``poisson_eps`` is its ``eps``)
POISSON_OPTIONS = ("estimator", "form", "weights", "variance", "poisson_eps", "defensive", "defensive_form",
                   "em_iters")
ORACLES = ("deterministic", "stochastic")


def pool_partitions(pool) -> list | None:
    """A partitioned pool's ``[file name, digest prefix]`` per partition
    (:func:`bayes_eval.partitioned.partition_record`), None for a pool read from one file."""
    return pool.derived("partitions", None, lambda: None, size=1)


def make_design(name: str, measure, cells, n_strata: int, *, oracle: str = "deterministic", **settings):
    """The session's design: :func:`bayes_eval.registry.build_design` (the same builder as
    ``bayes-eval simulate``), its ``oracle`` set (it selects q_N in the estimator).  Returns
    ``(design, n_strata)``; every refusal is a :class:`SessionError`.  ``cells=None``
    validates a Poisson design's settings without building its models.

    ``companion``: the companion model of ``ais`` / ``poisson-adaptive`` (``"calibrated"``
    or None; :func:`bayes_eval.designs.sweep_share`).  None here, so that session files
    written before companions existed replay unchanged; :meth:`Session.create` resolves
    ``"auto"`` and records it.
    """
    if oracle not in ORACLES:
        raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    if name not in registry.DESIGNS:
        raise SessionError(f"unknown design {name!r}; choose one of {', '.join(SESSION_DESIGNS)}")
    if name in POISSON_DESIGNS and oracle != "deterministic":
        raise SessionError(f"design {name!r} labels distinct items with inclusion probabilities: it needs the "
                           f"deterministic oracle (one true label per item), not {oracle!r}")
    try:
        design = registry.build_design(name, measure, cells, n_strata, oracle=oracle, **settings)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, SessionError):
            raise
        raise SessionError(f"design {name!r}: {exc}") from None
    if design.sampling == "draws":
        design = design._replace(oracle=oracle)
    return design, n_strata


def poisson_config(design, model, depth, branching, strength, lam, fixed_size, options, oracle,
                    companion=None) -> dict:
    """The JSON configuration of a Poisson design, every default resolved (so that a
    session file replays under later defaults too)."""
    if oracle != "deterministic":
        make_design(design, None, None, 0, oracle=oracle)  # raises the explanatory error
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(POISSON_OPTIONS))
    if unknown:
        raise SessionError(f"unknown Poisson option(s) {unknown}; valid: {', '.join(POISSON_OPTIONS)}",
                           cli=f"--poisson-option: unknown setting(s) {', '.join(unknown)}; valid: "
                               f"{', '.join(POISSON_OPTIONS)}")
    aliases = {"exact": "pareto", "random": None, "none": None}
    if isinstance(fixed_size, str) and fixed_size in aliases:
        fixed_size = aliases[fixed_size]
    if fixed_size == "auto":
        fixed_size = "pareto" if design == "poisson-adaptive" else None
    if fixed_size not in POISSON_SIZES:
        raise SessionError(f"fixed_size must be 'auto', 'exact', 'pareto', 'sequential' or None ('random'), "
                           f"got {fixed_size!r}")
    if fixed_size is not None and design == "poisson":
        raise SessionError("the static 'poisson' design is nested Poisson sampling: its rounds have a random size "
                           "(mean n); fixed-size rounds are offered for 'poisson-adaptive' only")
    try:
        for key in ("poisson_eps", "defensive"):
            if opts.get(key) is not None:
                opts[key] = float(opts[key])
        if opts.get("em_iters") is not None:
            opts["em_iters"] = int(opts["em_iters"])
    except (TypeError, ValueError) as exc:
        raise SessionError(f"bad Poisson option: {exc}", cli=f"--poisson-option: {exc}") from None
    em_iters = opts.pop("em_iters", None)
    em_iters = 10 if em_iters is None else em_iters
    if em_iters < 1:
        raise SessionError(f"em_iters must be >= 1, got {em_iters}", cli=f"--poisson-option em_iters must be >= 1, "
                                                                         f"got {em_iters}")
    kw = {k: v for k, v in opts.items() if v is not None}
    pd_design = make_design(design, None, None, 0, lam=float(lam), fixed_size=fixed_size, companion=companion,
                            **kw)[0].settings  # validates
    return {"model": model, "depth": int(depth), "branching": branching, "strength": float(strength),
            "em_iters": int(em_iters), "fixed_size": fixed_size, "estimator": pd_design.estimator,
            "form": pd_design.form, "weights": pd_design.weights, "variance": pd_design.variance,
            "poisson_eps": pd_design.eps, "defensive": pd_design.defensive,
            "defensive_form": pd_design.defensive_form, "lam": pd_design.lam, "companion": companion}


def measure_specs(measure, pool, thresholds=1024, beta=1.0, system=0):
    """Measures and their JSON specs from names, dicts or Measure objects
    (:func:`bayes_eval.registry.parse_measure_specs`)."""
    try:
        return registry.parse_measure_specs(measure, pool, thresholds, beta, system)
    except (TypeError, ValueError) as exc:
        raise SessionError(str(exc)) from None


def measure_of_spec(spec, pool):
    """A built-in measure from its JSON spec (:func:`bayes_eval.registry.measure_of_spec`)."""
    try:
        return registry.measure_of_spec(spec, pool)
    except (TypeError, ValueError) as exc:
        raise SessionError(registry.spec_error(spec, exc)) from None


component_names = registry.component_names


def keep_empty_default(keep_empty):
    """``keep_empty`` as :func:`~bayes_eval.simulate.run_simulation` uses it (None where
    the installed :func:`~bayes_eval.strata.stratify` has no such option)."""
    import inspect

    from .simulate import run_simulation
    from .strata import stratify

    if "keep_empty" not in inspect.signature(stratify).parameters:
        return None
    if keep_empty is not None:
        return bool(keep_empty)
    p = inspect.signature(run_simulation).parameters.get("keep_empty")
    return bool(p.default) if p is not None else False


def session_config(pool, measure, design: str, *, seed, oracle, n_strata, depth, branching, model, eps, lam, delta,
                   plugin, strength, n_fine, strata_method, keep_empty, system, thresholds, beta, label_map,
                   posterior_model, pool_path, fixed_size, poisson_options, companion, audit_floor=None):
    """The measures and the JSON configuration of a new session, every argument of
    :meth:`bayes_eval.session.Session.create` checked and every default resolved."""
    from .pool import Pool

    if not isinstance(pool, Pool) and not getattr(pool, "partitioned", False):
        raise SessionError(f"expected a Pool, got {type(pool).__name__}")
    if oracle not in ORACLES:
        raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    if design not in SESSION_DESIGNS:
        make_design(design, None, None, 0)  # raises the explanatory error
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SessionError(f"seed must be a non-negative integer, got {py_scalar(seed)!r}")
    if system is None:      # the measures' own system where they name one (strata follow its score)
        _, named = measure_specs(measure, pool, thresholds, beta, 0)
        used = {int(sp["system"]) for sp in named if "system" in sp}
        system = used.pop() if len(used) == 1 else 0
    if isinstance(system, bool) or not isinstance(system, (int, np.integer)) or not 0 <= system < pool.n_systems:
        raise SessionError(f"system must be one of the pool's systems 0..{pool.n_systems - 1}, "
                           f"got {py_scalar(system)!r}")
    measures, specs = measure_specs(measure, pool, thresholds, beta, system)
    label_map = annotate.parse_label_map(label_map)
    annotate.label_mapping(pool.n_classes, label_map)  # validates
    dkw = {"name": design}
    from .designs import resolve_companion

    try:
        comp = resolve_companion(companion, pool.n_classes, design)
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    if audit_floor is not None and design != "ais":
        raise SessionError(f"audit_floor applies to the ais design, not to {design!r}",
                           cli=f"--audit-floor applies to the ais design, not to {design!r}")
    if design == "ais":
        from .designs import AUDIT_FLOOR

        floor = AUDIT_FLOOR if audit_floor is None else audit_floor
        if isinstance(floor, bool) or not isinstance(floor, (int, float, np.integer, np.floating)) \
                or not 0.0 <= float(floor) < 1.0:
            raise SessionError(f"audit_floor must be a number in [0, 1), got {py_scalar(floor)!r}",
                               cli=f"--audit-floor must be in [0, 1), got {py_scalar(floor)!r}")
        dkw.update(model=model, depth=int(depth), branching=branching, eps=float(eps), delta=float(delta),
                   plugin=plugin, strength=float(strength), companion=comp, audit_floor=float(floor))
    elif design == "is":
        dkw.update(lam=float(lam), eps=float(eps))
    elif design == "oasis":
        dkw.update(eps=float(eps))
    elif design in POISSON_DESIGNS:
        dkw.update(poisson_config(design, model, depth, branching, strength, lam, fixed_size, poisson_options,
                                  oracle, comp))
    if design not in POISSON_DESIGNS and (fixed_size != "auto" or poisson_options):
        raise SessionError(f"fixed_size and poisson_options apply to the Poisson designs "
                           f"({', '.join(POISSON_DESIGNS)}), not to {design!r}",
                           cli=f"--poisson-size and --poisson-option apply to the Poisson designs "
                               f"({', '.join(POISSON_DESIGNS)}), not to {design!r}")
    from . import __version__

    config = {
        "measures": specs,
        "design": dkw,
        "oracle": oracle,
        "seed": int(seed),
        "n_strata": int(n_strata),
        "n_fine": n_fine,
        "strata_method": strata_method,
        "keep_empty": keep_empty_default(keep_empty),
        # several classes: strata by score bins fewer in proportion (strata.stratify; absent: as before)
        **({"class_bins": "proportional"} if pool.n_classes > 2 else {}),
        "system": int(system),
        "label_map": label_map,
        "posterior_model": posterior_model,
        "pool": {"path": os.path.abspath(pool_path) if pool_path not in (None, "demo") else pool_path,
                 "name": pool.name, "n_items": pool.n_items, "n_classes": pool.n_classes,
                 # how the pool's file is read again on reopening (bayes_eval.registry.load_pool)
                 "read": dict(pool.read_options),
                 # a partitioned pool: each partition's file and digest, to name a changed one on reopening
                 **({"partitions": parts} if (parts := pool_partitions(pool)) else {})},
        "created_at": time.time(),
        "bayes_eval_version": __version__,
    }
    return measures, config


def session_measures(specs, pool, measures, path):
    """The measures of a session file's ``specs``: built-in ones from their specs, custom
    ones as given again (checked against the specs) on reopening ``path``."""
    if measures is None:
        if any(s.get("custom") for s in specs):
            names = [s["name"] for s in specs if s.get("custom")]
            raise SessionError(f"{path}: the session uses custom measures {names}; pass them as measures=",
                               cli=f"{path}: the session uses custom measures {names}, made in Python; the "
                                   f"command line cannot rebuild them — open it from Python: "
                                   f"Session.open({path!r}, measures=[...])")
        ms = [measure_of_spec(s, pool) for s in specs]
    else:
        ms = list(measures) if isinstance(measures, (list, tuple)) else [measures]
        if len(ms) != len(specs):
            raise SessionError(f"{path}: the session has {len(specs)} measures, {len(ms)} given")
        for m, s in zip(ms, specs):
            if m.name != s["name"] or (s.get("custom") and list(m.names) != s["components"]):
                raise SessionError(f"{path}: measure {m.name!r} given where the session has {s['name']!r}")
    return ms
