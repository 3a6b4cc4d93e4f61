"""Things by name: the one registry of designs, measure specs and pools that the command
line, sessions, simulations, benchmarks and reports all call (``docs/architecture.md``).
Oracle models have theirs beside them, in :mod:`bayes_eval.models.registry`.

Designs
    :data:`DESIGNS` maps each name to a :class:`DesignSpec`: its sampling kind
    (``"draws"``: i.i.d. draws with replacement from a proposal over cells, weighted p/q --
    001 §3; ``"rounds"``: Poisson rounds with inclusion probabilities per cell, weighted
    1/b -- 000 §3), the extra cell key it needs (``"prior"``: cells split by the
    classifier's probability, so a per-item proposal is constant on a cell), whether it
    carries an oracle model, and its builder.  :func:`build_design` is the one place a
    design is made from its name and settings.

    To add a design: write ``my_design(...) -> Design`` (``bayes_eval.designs``: pure
    ``init`` / ``propose`` / ``update`` over a NamedTuple state), add a builder
    ``(measure, cells, n_strata, settings) -> Design`` and an entry to :data:`DESIGNS`;
    ``tests/test_architecture.py`` runs every registered design through a short simulation.

Measures
    A measure *spec* is the JSON a session records (``{"name": "fbeta", "beta": 2,
    "system": 0}``); :func:`measure_of_spec` builds the measure from it the way the CLI
    does (thresholds of curve measures from the pool's scores, the pool's classes).
    The catalogue itself is :mod:`bayes_eval.measures`.
"""
from __future__ import annotations

import json

from typing import Any, Callable, NamedTuple

import numpy as np

from . import _config  # noqa: F401
from . import designs as D
from . import measures as M
from .errors import PoolError

__all__ = [
    "DesignSpec",
    "DESIGNS",
    "design_names",
    "design_spec",
    "build_design",
    "MEASURES_NEEDING_THRESHOLDS",
    "measure_from_args",
    "measure_of_spec",
    "spec_error",
    "parse_measure_specs",
    "component_names",
    "load_pool",
]


class DesignSpec(NamedTuple):
    name: str
    kind: str  # "draws" (with replacement, weights p/q) or "rounds" (Poisson, weights 1/b)
    cell_key: str | None  # "prior": cells also split by the classifier's probability
    has_model: bool  # carries an oracle model (its proposal; the Bayesian interval is every design's)
    build: Callable[..., Any]  # (measure, cells, n_strata, settings) -> Design
    summary: str


def _passive(measure, cells, n_strata, s):
    return D.passive()


def _stratified(measure, cells, n_strata, s):
    return D.stratified()


def _static_is(measure, cells, n_strata, s):
    return D.static_is(measure.g, lam=s.get("lam", 0.9), eps=s.get("eps", 1e-3),
                       oracle=s.get("oracle", "deterministic"))


def _oasis(measure, cells, n_strata, s):
    return D.oasis(measure.g, n_strata, eps=s.get("eps", 1e-3))


def _ais(measure, cells, n_strata, s):
    from .ais import ais_design

    design, _ = ais_design(measure.g, cells, n_strata,
                           model=D.resolve_oracle_model(s.get("model", "auto"), cells, n_strata),
                           depth=s.get("depth", 8), branching=s.get("branching"), strength=s.get("strength", 1.0),
                           eps0=s.get("eps", 1e-3), delta=s.get("delta", 0.0),
                           oracle=s.get("oracle", "deterministic"), plugin=s.get("plugin", "model"),
                           em_iters=s.get("em_iters", 10), companion=s.get("companion"),
                           companion_units=s.get("companion_units", "stratum"), check_units=s.get("check_units"),
                           audit_floor=s.get("audit_floor", D.AUDIT_FLOOR))
    return design


def _poisson(measure, cells, n_strata, s):
    from .cells import leaf_probs
    from .models.registry import make_companion_model, make_oracle_model
    from .poisson_designs import as_design, poisson_design

    name = s["name"]
    if s.get("oracle", "deterministic") != "deterministic":
        raise ValueError(f"design {name!r} labels distinct items with inclusion probabilities: it needs the "
                         f"deterministic oracle (one true label per item), not {s['oracle']!r}")
    variance = s.get("variance")
    om = vm = cm = None
    if cells is not None:
        lp = leaf_probs(cells, n_strata)
        mkw = dict(depth=s.get("depth", 8), branching=s.get("branching"), strength=s.get("strength", 1.0),
                   em_iters=s.get("em_iters", 10))
        model = D.resolve_oracle_model(s.get("model", "auto"), cells, n_strata)
        if name == "poisson-adaptive" or variance == "model":
            om = make_oracle_model(model, lp, **mkw)
        if s.get("variance_model") not in (None, model):
            vm = make_oracle_model(s["variance_model"], lp, **mkw)
        if s.get("companion") is not None:
            cm = make_companion_model(s["companion"], lp)
    else:  # settings validated without cells: placeholders stand in for the models
        om = object() if name == "poisson-adaptive" or variance == "model" else None
        cm = object() if s.get("companion") is not None else None
    kw = {k: s[k] for k in ("estimator", "form", "variance", "defensive") if s.get(k) is not None}
    pd = poisson_design(name, weights=s.get("weights", "quadratic"), eps=s.get("poisson_eps", 1e-3),
                        lam=s.get("lam", 0.9), fixed_size=s.get("fixed_size"), model=om, n_strata=n_strata,
                        defensive_form=s.get("defensive_form", "linear"), variance_model=vm, companion=cm,
                        companion_form=s.get("companion_form", "sqrt"), **kw)
    return as_design(pd, measure.g if measure is not None else None)


#: every design, by name
DESIGNS: dict[str, DesignSpec] = {
    "passive": DesignSpec("passive", "draws", None, False, _passive, "i.i.d. draws from p(x) (001 Def. 2)"),
    "stratified": DesignSpec("stratified", "draws", None, False, _stratified,
                             "proportional stratified sampling, post-stratified estimator (001 §5)"),
    "is": DesignSpec("is", "draws", "prior", False, _static_is,
                     "static variance-minimizing importance sampling (002; 000 §2, eq. 13)"),
    "oasis": DesignSpec("oasis", "draws", None, False, _oasis, "OASIS: stratified AIS for F-measures"),
    "ais": DesignSpec("ais", "draws", None, True, _ais,
                      "adaptive importance sampling with an oracle model (001 Alg. 1)"),
    "poisson": DesignSpec("poisson", "rounds", "prior", False, _poisson, "offline Poisson sampling (000 Alg. 2)"),
    "poisson-adaptive": DesignSpec("poisson-adaptive", "rounds", None, True, _poisson,
                                   "adaptive Poisson rounds fed by the oracle model (000 App. E)"),
}


def design_names() -> list[str]:
    return list(DESIGNS)


def design_spec(name: str) -> DesignSpec:
    try:
        return DESIGNS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown design {name!r}; choose one of {', '.join(DESIGNS)}") from None


def build_design(name: str, measure, cells, n_strata: int, **settings):
    """The design ``name`` for a cell table: a :class:`~bayes_eval.designs.Design` whose
    ``sampling`` is the spec's kind (for ``"rounds"``, ``settings`` holds the
    :class:`~bayes_eval.poisson_designs.PoissonDesign` record).  ``settings``: ``oracle``, ``model``, ``depth``, ``branching``,
    ``strength``, ``eps``, ``delta``, ``plugin``, ``em_iters``, ``lam``, ``companion``
    (resolved: ``"calibrated"`` or None) and the Poisson settings of
    :func:`~bayes_eval.poisson_designs.poisson_design` (``poisson_eps`` is its ``eps``).
    ``cells=None`` validates the settings of a Poisson design without building models.

    A with-replacement design carries ``oracle`` whether or not its builder takes it (it
    selects q_N in the estimator and whether a repeated draw costs a label): until stop 73
    passive, stratified and OASIS ignored it here, so ``simulate --oracle stochastic`` simulated
    them under a deterministic oracle while a session of the same design was stochastic."""
    spec = design_spec(name)
    design = spec.build(measure, cells, n_strata, dict(settings, name=name))
    if spec.kind == "draws" and "oracle" in settings:
        design = design._replace(oracle=settings["oracle"])
    return design


# ------------------------------------------------------------------------------ measures
MEASURES_NEEDING_THRESHOLDS = ("pr_curve", "roc_curve", "auc")


def measure_from_args(name: str, pool, thresholds: int = 1024, beta: float = 1.0, system: int = 0):
    """A built-in measure as the command line names it: thresholds of the curve measures
    from ``system``'s scores on the pool, the pool's classes for every measure that takes them
    (accuracy, Brier, macro / micro F1: ``simulate --classes 3 --measure accuracy`` built a
    two-class accuracy on a pool of three)."""
    kw = {}
    if name in MEASURES_NEEDING_THRESHOLDS:
        kw["thresholds"] = M.default_thresholds(np.asarray(pool.scores[:, system]), thresholds)
    if name == "fbeta":
        kw["beta"] = beta
    if name in ("macro_f1", "micro_f1") or (pool.n_classes != 2 and M.takes_n_classes(name)):
        kw["n_classes"] = pool.n_classes
    kw["system"] = system
    m = M.get(name, **kw)
    if m.n_classes != pool.n_classes:
        several = ", ".join(n for n in M.MEASURE_NAMES if M.takes_n_classes(n))
        raise ValueError(f"{name} is a measure of two classes; this pool has {pool.n_classes}: use one of {several}")
    return m


def measure_of_spec(spec: dict, pool):
    """A built-in measure from its JSON spec, as the CLI builds it, with the pool's number
    of classes where the measure takes one (accuracy, Brier, macro/micro F1).  Raises
    ``ValueError`` / ``TypeError`` for a spec that cannot be built."""
    name = spec["name"]
    system = int(spec.get("system", 0))
    m = measure_from_args(name, pool, thresholds=int(spec.get("thresholds", 1024)),
                          beta=float(spec.get("beta", 1.0)), system=system)
    if m.n_classes != pool.n_classes and M.takes_n_classes(name):
        m = M.get(name, system=system, n_classes=pool.n_classes)
    return m


def spec_error(spec, exc) -> str:
    """The message for a measure ``spec`` that cannot be built: the measure by its name (a
    spec's dict is the session file's, not the user's words), once."""
    name = spec.get("name") if isinstance(spec, dict) else spec
    msg = str(exc)
    return msg if msg.startswith(f"{name} ") else f"measure {name!r}: {msg}"


def parse_measure_specs(measure, pool, thresholds: int = 1024, beta: float = 1.0, system: int = 0):
    """Measures and their JSON specs from names (``"f1"``, ``"precision,recall"``), dicts
    (``{"name": "fbeta", "beta": 2}``) or Measure objects (built-in ones recorded by name,
    others as ``custom``).  Raises ``ValueError`` naming what is wrong."""
    items = measure if isinstance(measure, (list, tuple)) else [measure]
    flat = []
    for it in items:
        if isinstance(it, str):
            flat.extend(p.strip() for p in it.split(",") if p.strip())
        else:
            flat.append(it)
    if not flat:
        raise ValueError("a session needs at least one measure")
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
            raise ValueError(f"unknown measure {name!r}; valid names: {', '.join(M.MEASURE_NAMES)}")
        spec.setdefault("system", system)
        if name == "fbeta":
            spec.setdefault("beta", beta)
        if name in MEASURES_NEEDING_THRESHOLDS:
            spec.setdefault("thresholds", thresholds)
        try:
            out.append(measure_of_spec(spec, pool))
        except (TypeError, ValueError) as exc:
            raise ValueError(spec_error(spec, exc)) from None
        specs.append(spec)
    seen = [json.dumps(sp, sort_keys=True, default=str) for sp in specs]
    twice = [sp["name"] for k, sp in enumerate(specs) if seen[k] in seen[:k]]
    if twice:   # two identical rows of every table, "NOT RELIABLE for f1:f1, f1:f1" (stop 82's walk)
        raise ValueError(f"measure {twice[0]!r} is given twice; give each measure once")
    if len({m.n_classes for m in out}) > 1 or out[0].n_classes != pool.n_classes:
        raise ValueError(f"the measures' classes {[m.n_classes for m in out]} do not match the pool's "
                         f"{pool.n_classes} classes")
    return out, specs


def component_names(measures) -> list[str]:
    """The components of several measures, prefixed by the measure where names repeat."""
    names = [n for m in measures for n in m.names]
    if len(set(names)) == len(names):
        return names
    return [f"{m.name}:{n}" for m in measures for n in m.names]


# ------------------------------------------------------------------------------ pools
def _prob_columns(names, n_classes: int) -> tuple:
    """The columns of the class probabilities (``columns["prob"]``): one per class, in class order."""
    names = [names] if isinstance(names, str) else [str(c) for c in names]
    if n_classes == 2:
        raise PoolError("class probability columns are for pools of several classes; a binary pool's score is the "
                        "positive class's probability: name its column as the score",
                        cli="--prob-columns is for pools of several classes (--classes C), or a binary pool's two "
                            "class probabilities in class order (--prob-columns P0,P1); its score is the positive "
                            "class's probability: --score-column NAME")
    if len(names) != n_classes or not all(names):
        raise PoolError(f"class probability columns: {len(names)} named ({names}), the pool has {n_classes} classes: "
                        f"name one column per class, in class order 0..{n_classes - 1}",
                        cli=f"--prob-columns names {len(names)} column(s) ({','.join(names)}); the pool has "
                            f"{n_classes} classes (--classes): name one per class, in class order 0..{n_classes - 1}")
    return tuple(names)


def _checked_pair(pool, pair):
    """A binary pool whose score is ``pair[1]``, the second of its two class probability
    columns: the first must be there and the two sum to 1 per row (as several classes' do,
    :func:`bayes_eval.checks.check_class_sums`); the pool's notes say so."""
    from dataclasses import replace

    from .checks import check_class_sums, check_finite, missing_column

    own = pool.columns
    if own is None or pair[0] not in own.columns:
        raise missing_column(pair[0], "prob", list(own.columns) if own is not None else [])
    try:
        p0 = np.asarray(own[pair[0]], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise PoolError(f"column {pair[0]!r}: not numbers ({exc}); --prob-columns names the two classes' "
                        f"probabilities") from None
    check_finite("prob", p0, pool.ids, [pair[0]])
    both = np.stack([p0, np.asarray(pool.scores[:, 0], dtype=np.float64)], -1)[:, None, :]
    try:
        note = check_class_sums(f"{pair[0]} + {pair[1]}", both, pool.ids, 2)
    except PoolError as exc:
        more = "; a pool of several classes needs --classes C and one --prob-columns column per class"
        raise PoolError(str(exc) + more.replace("--classes C", "n_classes=C").replace("--prob-columns ", ""),
                        cli=str(exc) + more) from None
    said = (f"score from column {pair[1]!r}, the positive class's probability (--prob-columns {pair[0]},{pair[1]}: "
            f"{pair[0]!r} checked to be 1 minus it)")
    # not an own column: a batch file shows annotators the pool's own columns, and a probability is a hint
    return replace(pool, columns=own.drop(columns=[pair[0]]), notes=pool.notes + tuple(n for n in (note, said) if n))


def load_pool(path: str, score_kind: str | None = None, threshold: float | None = None, *, legacy: bool = False,
              engine: str | None = None, scheduler: str | None = None, client=None, csv_ids: str = "text",
              id_column: str | None = None, columns: dict | None = None, label_map: dict | None = None,
              n_classes: int = 2, classes_prior: str = "confidence"):
    """A pool from a Parquet, CSV / TSV or JSON (lines) file (:meth:`bayes_eval.pool.Pool.from_file`),
    or the built-in demo pool for ``"demo"``.

    A directory or glob of Parquet files is a partitioned pool
    (:meth:`bayes_eval.pool.Pool.from_parquet_dataset`): ``engine`` ``"memory"`` reads it
    whole, ``"dask"`` keeps it on a Dask cluster (``client``, else the scheduler at
    ``scheduler``, else a local one); None picks memory when it fits in a quarter of RAM.

    ``score_kind`` (None/"auto" detects), ``threshold`` (predictions ``score >= T`` for a
    pool without a ``pred`` column) and ``legacy`` as
    :meth:`bayes_eval.pool.Pool.from_arrays`, ``csv_ids`` as :meth:`~bayes_eval.pool.Pool.from_file`,
    ``id_column`` the column holding the item ids when it is not ``item`` (``--id-column``),
    ``columns`` the file's own names of its score / pred / label columns, e.g.
    ``{"score": "prob", "pred": "predicted", "label": "gold"}`` (``--score-column`` etc.), and for a pool
    of several classes ``"prob"``: its C class probability columns in class order (``--prob-columns``),
    ``label_map`` ({name: class}) for ``pred`` / ``label`` columns written as class names
    (``--label-map``), ``n_classes`` the size of the label set (``--classes``; a file of
    several classes gives ``pred`` / ``label`` in 0..C−1), ``classes_prior`` as
    :meth:`~bayes_eval.pool.Pool.from_arrays`; a session records ``pool.read_options`` and reopens
    with them."""
    from dataclasses import replace

    from .pool import Pool, demo_pool

    columns = {k: v for k, v in (columns or {}).items() if v is not None}
    unknown = sorted(set(columns) - {"score", "pred", "label", "prob"})
    if unknown:
        raise PoolError(f"columns: unknown role(s) {unknown}; the roles are 'score', 'pred', 'label' and 'prob'")
    flags = " / ".join("--prob-columns" if k == "prob" else f"--{k}-column" for k in columns)
    if columns and path == "demo":
        raise PoolError("the demo pool's columns are its own; column names apply to a pool file",
                        cli=f"the demo pool's columns are its own; {flags} apply to a pool file")
    pair = None     # a binary pool's two class probabilities (predict_proba's columns): the second is the score
    if "prob" in columns and int(n_classes) == 2 and "score" not in columns:
        names = [columns["prob"]] if isinstance(columns["prob"], str) else [str(c) for c in columns["prob"]]
        if len(names) == 2 and all(names):
            pair, columns["score"] = names, names[1]
            del columns["prob"]
    if "prob" in columns:
        columns["prob"] = _prob_columns(columns["prob"], int(n_classes))
    for role in ("score", "pred"):      # several systems: one column each, in system order
        v = columns.get(role)
        if v is not None and not isinstance(v, str):
            v = tuple(str(c) for c in v)
            columns[role] = v[0] if len(v) == 1 else v
    named = ([c for k, v in columns.items() for c in ([v] if isinstance(v, str) else v)]
             + ([id_column] if id_column is not None else []) + (pair[:1] if pair else []))
    if len(set(named)) < len(named):
        raise PoolError(f"one column named for two roles: {columns}" + (f", ids {id_column!r}" if id_column else ""),
                        cli="one column given to two of " + flags + (" / --id-column" if id_column else ""))

    if id_column is not None and path == "demo":
        raise PoolError("the demo pool's ids are its row numbers; an id column applies to a pool file",
                        cli="the demo pool's ids are its row numbers; --id-column applies to a pool file")
    if path == "demo":
        if threshold is not None:
            raise PoolError("the demo pool has predictions; a threshold applies only to a pool without a 'pred' column",
                            cli="the demo pool has predictions; --threshold applies only to a pool without a 'pred' column")
        if score_kind not in (None, "auto", "margin"):
            raise PoolError(f"the demo pool's scores are margins, not {score_kind!r}",
                            cli=f"the demo pool's scores are margins, not --score-kind {score_kind}")
        if int(n_classes) != 2:
            raise PoolError("the demo pool is binary", cli=f"the demo pool is binary, not --classes {n_classes}")
        return demo_pool()
    from .partitioned import is_partitioned_path

    if is_partitioned_path(path):
        # the files' own names, read by each partition's from_frame (either engine) and recorded for a reopen
        several = [k for k, v in columns.items() if k != "prob" and not isinstance(v, str)]
        if several or pair:
            raise PoolError("a partitioned pool reads one system's score and prediction columns; several systems' "
                            "columns and a binary pool's two class probabilities apply to a single pool file",
                            cli=f"{flags}: a partitioned pool reads one system's score and prediction columns; several "
                                f"systems' columns and a binary pool's two class probabilities (--prob-columns P0,P1: "
                                f"give --score-column P1) apply to a single pool file")
        frame_kw = {**{k: list(v) if k == "prob" else v for k, v in columns.items()},
                    **({"item": id_column} if id_column is not None else {}),
                    **({"label_map": {str(k): int(v) for k, v in label_map.items()}} if label_map else {})}
        return Pool.from_parquet_dataset(path, score_kind=score_kind, threshold=threshold, engine=engine,
                                         scheduler=scheduler, client=client, n_classes=int(n_classes),
                                         classes_prior=classes_prior, frame_kw=frame_kw or None)
    if engine == "dask":
        raise PoolError(f"--engine dask reads a partitioned pool (a directory or glob of Parquet files), not the "
                        f"single file {path}")
    kw = {"item": id_column} if id_column is not None else {}
    if int(n_classes) != 2:
        kw["n_classes"] = int(n_classes)
        kw["classes_prior"] = classes_prior
    if label_map:
        kw["label_map"] = {str(k): int(v) for k, v in label_map.items()}
    pool = Pool.from_file(path, score_kind=score_kind, threshold=threshold, legacy=legacy, csv_ids=csv_ids,
                          **kw, **{k: list(v) if isinstance(v, tuple) else v for k, v in columns.items()})
    if pair:
        pool = _checked_pair(pool, pair)
    if not columns:
        return pool
    said = ", ".join(f"class probabilities from columns {', '.join(map(repr, v))}" if k == "prob"
                     else f"{k} from column {v!r}" if isinstance(v, str)
                     else f"{k} of systems 0..{len(v) - 1} from columns {', '.join(map(repr, v))}"
                     for k, v in columns.items() if not (pair and k == "score"))   # _checked_pair said it
    recorded = {**{k: v for k, v in columns.items() if not (pair and k == "score")},
                **({"prob": tuple(pair)} if pair else {})}      # a reopened session checks the pair again
    if not said:
        return replace(pool, column_names=tuple(sorted(recorded.items())))
    return replace(pool, column_names=tuple(sorted(recorded.items())), notes=pool.notes + (said,))
