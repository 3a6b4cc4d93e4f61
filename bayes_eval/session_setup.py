"""What a session is set up from: its design built by name and its measures parsed from
specs, with every default resolved so that the session file replays under later defaults.

Moved verbatim from ``session.py`` (issue 13); these are to become calls into
:mod:`bayes_eval.registry`.
"""
from __future__ import annotations

import os
import time

import numpy as np

from . import annotate
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
]

SESSION_DESIGNS = ("passive", "stratified", "is", "oasis", "ais", "poisson", "poisson-adaptive")
POISSON_DESIGNS = ("poisson", "poisson-adaptive")
#: settings of the Poisson designs a session takes in ``poisson_options`` (as
#: :func:`bayes_eval.poisson_designs.run_poisson_simulation` names them)
POISSON_OPTIONS = ("estimator", "form", "weights", "variance", "poisson_eps", "defensive", "defensive_form",
                   "em_iters")
ORACLES = ("deterministic", "stochastic")

#: stands in for the oracle model when a Poisson design's settings are only validated
_PLACEHOLDER_MODEL = object()


def make_design(name: str, measure, cells, n_strata: int, *, oracle: str = "deterministic",
                model: str = "dirichlet-tree", depth: int = 8, branching: int | None = None,
                eps: float = 1e-3, lam: float = 0.9, delta: float = 0.0, plugin: str = "model",
                strength: float = 1.0, fixed_size: str | None = None, estimator: str | None = None,
                form: str | None = None, weights: str = "quadratic", variance: str | None = None,
                poisson_eps: float = 1e-3, defensive: float | None = None, defensive_form: str = "linear",
                em_iters: int = 10, companion: str | None = None):
    """Build a design by name, as :func:`bayes_eval.simulate.run_simulation` does.

    Returns ``(design, n_strata)``; the design's ``oracle`` is set to ``oracle`` (it
    selects q_N in the estimator, as in ``simulate._estimate``).  ``is`` and ``poisson``
    expect cells split by the classifier's prior (``simulate.prior_key``).

    ``poisson`` / ``poisson-adaptive`` return a
    :class:`~bayes_eval.poisson_designs.PoissonDesign` built as
    :func:`~bayes_eval.poisson_designs.run_poisson_simulation` builds it (the oracle
    model by :func:`~bayes_eval.poisson_designs.build_model`; ``fixed_size``,
    ``estimator``, ``form``, ``weights``, ``variance``, ``poisson_eps``, ``defensive``,
    ``defensive_form``, ``em_iters`` as there); deterministic oracle only.

    ``companion``: the companion model of ``ais`` / ``poisson-adaptive`` (``"calibrated"``
    or None; :func:`bayes_eval.designs.sweep_share`).  None here, so that session files
    written before companions existed replay unchanged; :meth:`Session.create` resolves
    ``"auto"`` and records it.
    """
    from . import designs as D

    if oracle not in ORACLES:
        raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    if name in POISSON_DESIGNS:
        if oracle != "deterministic":
            raise SessionError(f"design {name!r} labels distinct items with inclusion probabilities: it needs the "
                               f"deterministic oracle (one true label per item), not {oracle!r}")
        from .poisson_designs import build_model, poisson_design

        om = cm = None
        try:
            if cells is not None and (name == "poisson-adaptive" or variance == "model"):
                om = build_model(model, cells, n_strata, depth=depth, branching=branching, strength=strength,
                                 em_iters=em_iters)
            if companion is not None:
                if cells is not None:
                    from .ais import companion_model

                    cm = companion_model(companion, cells, n_strata)
                else:
                    cm = _PLACEHOLDER_MODEL
            design = poisson_design(name, estimator=estimator, form=form, weights=weights, variance=variance,
                                    eps=poisson_eps, lam=lam, fixed_size=fixed_size,
                                    model=om if cells is not None else _PLACEHOLDER_MODEL, n_strata=n_strata,
                                    defensive=defensive, defensive_form=defensive_form, companion=cm)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, SessionError):
                raise
            raise SessionError(f"design {name!r}: {exc}") from None
        return design, n_strata
    if name == "passive":
        design = D.passive()
    elif name == "stratified":
        design = D.stratified()
    elif name == "is":
        design = D.static_is(measure.g, lam=lam, eps=eps, oracle=oracle)
    elif name == "oasis":
        design = D.oasis(measure.g, n_strata, eps=eps)
    elif name == "ais":
        from .ais import ais_design

        design, n_strata = ais_design(measure.g, cells, n_strata, model=model, depth=depth, branching=branching,
                                      strength=strength, eps0=eps, delta=delta, oracle=oracle, plugin=plugin,
                                      companion=companion)
    else:
        raise SessionError(f"unknown design {name!r}; choose one of {', '.join(SESSION_DESIGNS)}")
    return design._replace(oracle=oracle), n_strata


def poisson_config(design, model, depth, branching, strength, lam, fixed_size, options, oracle,
                    companion=None) -> dict:
    """The JSON configuration of a Poisson design, every default resolved (so that a
    session file replays under later defaults too)."""
    if oracle != "deterministic":
        make_design(design, None, None, 0, oracle=oracle)  # raises the explanatory error
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(POISSON_OPTIONS))
    if unknown:
        raise SessionError(f"unknown Poisson option(s) {unknown}; valid: {', '.join(POISSON_OPTIONS)}")
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
        raise SessionError(f"bad Poisson option: {exc}") from None
    em_iters = opts.pop("em_iters", None)
    em_iters = 10 if em_iters is None else em_iters
    if em_iters < 1:
        raise SessionError(f"em_iters must be >= 1, got {em_iters}")
    kw = {k: v for k, v in opts.items() if v is not None}
    pd_design, _ = make_design(design, None, None, 0, lam=float(lam), fixed_size=fixed_size, companion=companion,
                               **kw)  # validates
    return {"model": model, "depth": int(depth), "branching": branching, "strength": float(strength),
            "em_iters": int(em_iters), "fixed_size": fixed_size, "estimator": pd_design.estimator,
            "form": pd_design.form, "weights": pd_design.weights, "variance": pd_design.variance,
            "poisson_eps": pd_design.eps, "defensive": pd_design.defensive,
            "defensive_form": pd_design.defensive_form, "lam": pd_design.lam, "companion": companion}


def measure_specs(measure, pool, thresholds=1024, beta=1.0, system=0):
    """Measures and their JSON specs from names, dicts or Measure objects."""
    from . import measures as M

    items = measure if isinstance(measure, (list, tuple)) else [measure]
    flat = []
    for it in items:
        if isinstance(it, str):
            flat.extend(p.strip() for p in it.split(",") if p.strip())
        else:
            flat.append(it)
    if not flat:
        raise SessionError("a session needs at least one measure")
    out, specs = [], []
    for it in flat:
        if isinstance(it, M.Measure):
            try:
                builtin = M.get(it.name)
            except (ValueError, TypeError):
                builtin = None
            if builtin is it:
                spec = {"name": it.name, "system": 0}
            else:
                spec = {"name": it.name, "custom": True, "components": list(it.names)}
            out.append(it)
            specs.append(spec)
            continue
        spec = dict(it) if isinstance(it, dict) else {"name": it}
        name = spec.get("name")
        if name not in M.MEASURE_NAMES:
            raise SessionError(f"unknown measure {name!r}; valid names: {', '.join(M.MEASURE_NAMES)}")
        spec.setdefault("system", system)
        if name == "fbeta":
            spec.setdefault("beta", beta)
        if name in ("pr_curve", "roc_curve", "auc"):
            spec.setdefault("thresholds", thresholds)
        out.append(measure_of_spec(spec, pool))
        specs.append(spec)
    if len({m.n_classes for m in out}) > 1 or out[0].n_classes != pool.n_classes:
        raise SessionError(f"the measures' classes {[m.n_classes for m in out]} do not match the pool's "
                           f"{pool.n_classes} classes")
    return out, specs


def measure_of_spec(spec, pool):
    """A built-in measure from its JSON spec, as the CLI builds it (thresholds of curve
    measures from the pool's scores), with the pool's number of classes where the
    measure takes one (accuracy, Brier, macro/micro F1)."""
    import inspect

    from . import measures as M
    from .cli import measure_from_args

    name = spec["name"]
    try:
        m = measure_from_args(name, pool, thresholds=int(spec.get("thresholds", 1024)),
                              beta=float(spec.get("beta", 1.0)), system=int(spec.get("system", 0)))
        if m.n_classes != pool.n_classes:
            factory = getattr(M, "_REGISTRY", {}).get(name)
            if factory is not None and "n_classes" in inspect.signature(factory).parameters:
                m = M.get(name, system=int(spec.get("system", 0)), n_classes=pool.n_classes)
    except (TypeError, ValueError) as exc:
        raise SessionError(f"measure {spec}: {exc}") from None
    return m


def component_names(measures):
    names = [n for m in measures for n in m.names]
    if len(set(names)) == len(names):
        return names
    return [f"{m.name}:{n}" for m in measures for n in m.names]


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
                   posterior_model, pool_path, fixed_size, poisson_options, companion):
    """The measures and the JSON configuration of a new session, every argument of
    :meth:`bayes_eval.session.Session.create` checked and every default resolved."""
    from .pool import Pool

    if not isinstance(pool, Pool):
        raise SessionError(f"expected a Pool, got {type(pool).__name__}")
    if oracle not in ORACLES:
        raise SessionError(f"oracle must be one of {ORACLES}, got {oracle!r}")
    if design not in SESSION_DESIGNS:
        make_design(design, None, None, 0)  # raises the explanatory error
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SessionError(f"seed must be a non-negative integer, got {seed!r}")
    measures, specs = measure_specs(measure, pool, thresholds, beta, system)
    label_map = annotate.parse_label_map(label_map)
    annotate.label_mapping(pool.n_classes, label_map)  # validates
    dkw = {"name": design}
    from .designs import resolve_companion

    try:
        comp = resolve_companion(companion, pool.n_classes, design)
    except ValueError as exc:
        raise SessionError(str(exc)) from None
    if design == "ais":
        dkw.update(model=model, depth=int(depth), branching=branching, eps=float(eps), delta=float(delta),
                   plugin=plugin, strength=float(strength), companion=comp)
    elif design == "is":
        dkw.update(lam=float(lam), eps=float(eps))
    elif design == "oasis":
        dkw.update(eps=float(eps))
    elif design in POISSON_DESIGNS:
        dkw.update(poisson_config(design, model, depth, branching, strength, lam, fixed_size, poisson_options,
                                  oracle, comp))
    if design not in POISSON_DESIGNS and (fixed_size != "auto" or poisson_options):
        raise SessionError(f"fixed_size and poisson_options apply to the Poisson designs "
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
        "system": int(system),
        "label_map": label_map,
        "posterior_model": posterior_model,
        "pool": {"path": os.path.abspath(pool_path) if pool_path not in (None, "demo") else pool_path,
                 "name": pool.name, "n_items": pool.n_items, "n_classes": pool.n_classes},
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
            raise SessionError(f"{path}: the session uses custom measures {names}; pass them as measures=")
        ms = [measure_of_spec(s, pool) for s in specs]
    else:
        ms = list(measures) if isinstance(measures, (list, tuple)) else [measures]
        if len(ms) != len(specs):
            raise SessionError(f"{path}: the session has {len(specs)} measures, {len(ms)} given")
        for m, s in zip(ms, specs):
            if m.name != s["name"] or (s.get("custom") and list(m.names) != s["components"]):
                raise SessionError(f"{path}: measure {m.name!r} given where the session has {s['name']!r}")
    return ms
