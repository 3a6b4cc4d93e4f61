"""What a session's labels say: estimates, intervals, the Bayesian posterior and the
reports built on them -- the read side of :class:`~bayes_eval.session.Session`, which
inherits these methods from :class:`SessionReports`.

* **Estimator** (001 eq. 1 and §3.3.2).  R̂ = (1/n) Σ_j w_j ℓ(x_j, y_j) over every draw,
  repeats included, w_j = p(x_j)/q_{j-1}(x_j), and the delta-method covariance with q_N
  the most recent proposal; the stratified design uses the post-stratified estimator
  (001 §5); the Poisson designs combine their rounds' Horvitz-Thompson records
  (:mod:`bayes_eval.stages`).  Because the loss and the proposals are constant on a cell,
  the sums are accumulated per (cell, class); :meth:`SessionReports.estimate_draws`
  computes the same from the raw draws, for checking.
* **Several measures** (001 §3.3.1, sample reuse): the labels serve every measure; the
  design targets the first.
* **Bayesian interval**: the finite-pool posterior (:mod:`bayes_eval.posterior`) given the
  labeled counts per cell, with the oracle model of
  :func:`bayes_eval.session_core.posterior_model`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from . import _config  # noqa: F401  (float64)
from .errors import SessionError
from .estimators import MODEL_CHECK_MAX
from .results import SESSION_BAYES_DRAWS
from .session_core import posterior_model as core_posterior_model
from .session_core import posterior_sampler, resolved_program

__all__ = ["SessionReports"]



class SessionReports:
    """The read side of a :class:`~bayes_eval.session.Session` (a mixin).

    It reads the session's state and never changes it: ``measures``, ``config``,
    ``pool``, ``seed``, ``path``, ``design_name``, ``oracle``, ``n_stages``, ``n_labels``,
    ``n_pending``; the session file ``_store``; the compiled core ``_core``, the stage kind ``_kind``
    (:mod:`bayes_eval.stages`), the closed stages' ``_snapshots``, the component names
    ``_names``, the tallies ``_labeled``, ``_n_labels``, ``_n_draws``, ``_sum_w``,
    ``_sum_w2``, ``_max_w``, the draw log ``_draws`` with the labels ``_label_of`` /
    ``_draw_label``, ``_stochastic``, ``_n_classes``, and its caches ``_est_cache`` (per
    stage and measure) and ``_post_cache`` (posterior draws and intervals per closed stage;
    those before the last few stages are dropped when a stage closes).
    """

    def _est(self, snap_index: int, j: int):
        key = (snap_index, j)
        if key not in self._est_cache:
            est = self._kind.estimate(self._snapshots, snap_index, j)
            chk = np.full(np.shape(est.value), np.nan) if getattr(est, "check", None) is None else np.asarray(est.check)
            # one label has no spread to estimate a variance from (its CLT interval read [v, v])
            one = getattr(self._snapshots[snap_index], "labels", 2) < 2
            self._est_cache[key] = (np.asarray(est.value), np.asarray(est.cov) * (np.nan if one else 1.0), np.asarray(est.risk), chk,
                                    None if est.feasible is None else np.asarray(est.feasible))
        return self._est_cache[key]  # (value, cov, risk, check, feasible)

    def clt_check(self, snap_index: int = -1) -> np.ndarray:
        """Per component, the model-based ÷ own-weight variance of the CLT interval after a
        closed stage (:func:`~bayes_eval.estimators.model_assisted`; NaN where the design
        has no calibrated model): above :data:`~bayes_eval.estimators.MODEL_CHECK_MAX` the
        model places variance on positives where the design draws few items, which no draw
        so far can confirm or refute, and the CLT-based intervals are not reliable."""
        if not self._snapshots:
            return np.full(len(self._names), np.nan)
        i = snap_index % len(self._snapshots)
        out = []
        far = {n for n, _ in self.unreached}   # measures counting items the design never draws: no check passes
        for j, m in enumerate(self.measures):
            c = np.atleast_1d(self._est(i, j)[3])
            out.append(np.full(c.shape, np.inf) if m.name in far else c)
        return np.concatenate(out)

    def _values(self, snap_index=-1):
        """(value, sd) over all components after a closed stage (NaN before any)."""
        if not self._snapshots:
            m = len(self._names)
            return np.full(m, np.nan), np.full(m, np.nan)
        i = snap_index % len(self._snapshots)
        vals, sds = [], []
        for j in range(len(self.measures)):
            v, cov, _, _, _ = self._est(i, j)
            vals.append(v)
            sds.append(np.sqrt(np.clip(np.diagonal(cov), 0.0, None)))
        return np.concatenate(vals), np.concatenate(sds)

    def feasible(self, snap_index: int = -1) -> np.ndarray:
        """(4, m) over all components after a closed stage: the lowest and highest value of each
        component over every completion of the pool given the labels -- what the labels alone
        allow, with no model and no CLT -- and the values one unlabeled item's class inside them
        (:func:`bayes_eval.feasible.feasible_range`).  The estimate is projected onto the range
        and the CLT-based intervals cut to it (:func:`bayes_eval.feasible.cut`).  ±inf where not
        computed: measures not linear-fractional (MCC, macro-F1, ...), a stochastic oracle,
        stages after a skip."""
        from .feasible import unknown

        if not self._snapshots:
            return unknown(len(self._names), np)
        i = snap_index % len(self._snapshots)
        parts = [unknown(len(meas.names), np) if (f := self._est(i, j)[4]) is None else f
                 for j, meas in enumerate(self.measures)]
        return np.concatenate(parts, axis=1)

    def blind_spot(self, snap_index: int = -1) -> dict | None:
        """What the labels after a closed stage have barely seen, and what positives hidden there
        would do (:func:`bayes_eval.feasible.blind_spot`; no model): None for a stochastic oracle,
        a pool that is not binary, or before any stage."""
        from .feasible import blind_spot
        from .results import measure_bounds

        if not self._snapshots or self._stochastic:
            return None
        i, core = snap_index % len(self._snapshots), self._core
        f, b = self.feasible(i)[:2], np.concatenate([measure_bounds(m) for m in self.measures]).T   # the twin is a completion
        return blind_spot(core.size, self._snapshots[i].labeled, core.p_cell, core.loss_tables,
                          [m.g for m in self.measures], [self._est(i, j)[2] for j in range(len(self.measures))],
                          values=self._values(i)[0], value_range=(np.fmax(f[0], b[0]), np.fmin(f[1], b[1])))

    def _cut(self, lower, upper, snap_index: int = -1):
        """A CLT-based interval cut to what the labels allow and to the measure's own bounds
        (:func:`~bayes_eval.measures.component_range`: F1 above 1 is impossible, and for the
        measures without a range from the labels -- MCC, macro-F1, AUC -- a macro-F1 interval
        reached 1.084): every CLT-based bound the session shows goes through here."""
        from .feasible import cut
        from .results import clip_to_bounds, measure_bounds

        lo, hi = cut(np.asarray(lower, float), np.asarray(upper, float), self.feasible(snap_index))
        return clip_to_bounds(lo, hi, np.concatenate([measure_bounds(m) for m in self.measures]))

    def estimate(self) -> pd.Series:
        """Ĝ after the last closed stage, one entry per component (NaN where undefined)."""
        v, _ = self._values()
        return pd.Series(v, index=self._names, name="estimate")

    def estimate_draws(self, measure=None):
        """The importance-weighted estimate computed from the raw draws with
        :func:`~bayes_eval.estimators.is_estimate_draws` (001 eq. 1, §3.3.2) — for any
        measure, also one not in the session (sample reuse, 001 §3.3.1: valid where the
        proposals cover the measure's support).  ``measure`` defaults to the first.
        IS designs only."""
        from .estimators import is_estimate_draws
        from .stages import effective_draws

        self._kind.require_draws(self.design_name)
        if self._core.design.estimator != "is":
            raise SessionError("estimate_draws is for importance-sampling designs (not 'stratified')")
        measure = self.measures[0] if measure is None else measure
        k = self._snapshots[-1].draws if self._snapshots else 0
        rows, cells, _, _, w = self._draws.arrays(0, k)
        y = self._draw_labels(k)
        out = y < 0   # draws of skipped items: outside the population (session_skip), their loss zero
        y = np.where(out, 0, y)
        feats = self.pool.features()
        sub = type(feats)(*(np.asarray(a)[rows] for a in feats))
        loss = np.where(out[:, None], 0.0, np.asarray(measure.loss(sub))[np.arange(rows.size), y])
        prop = self._kind.prop
        if self._stochastic:
            qn = np.asarray(prop.unl)[cells]
        else:
            qn = np.asarray(prop.lab)[cells, y]
        p_over_qn = np.where(qn > 0, self._core.p_cell[cells] / np.where(qn > 0, qn, 1.0), 0.0)
        n = effective_draws(rows.size, float(np.sum(w)), float(np.sum(np.asarray(w)[out])))
        return is_estimate_draws(measure.g, loss, w, p_over_qn, n=n)

    def reuse_of(self, measure) -> dict:
        """Where :meth:`estimate_draws` of a measure the session was not created with can be
        read (:mod:`bayes_eval.reuse`): ``covered`` (m,) bool, the components whose support the
        design's proposal covers (001 §3.3.1; AIS draws nothing where the session's measure has
        no loss, which another measure may count), and ``feasible`` (4, m) what the labels allow
        (:func:`bayes_eval.feasible.feasible_range`; ±inf where not computed) to project the
        estimate onto and cut its interval to."""
        from .feasible import feasible_range, unknown
        from .posterior import labeled_table
        from .reuse import reuse_support
        from .session_core import measure_cells

        self._kind.require_draws(self.design_name)
        if getattr(self.pool, "partitioned", False):
            raise SessionError("the design's estimate of a measure the session was not created with needs the pool's "
                               "cells in memory (a partitioned pool keeps them on its workers): create the session "
                               "with that measure (--measure pr_curve), or reopen it with --engine memory")
        cells, item_cell = measure_cells(self._core, self.pool, self.measures, self.config, measure)
        rows, labels = self.labels_in_estimate()
        n_cells, c = int(cells.n_cells), self._n_classes
        labeled = np.asarray(labeled_table(item_cell, n_cells, c, rows, labels))
        unlabeled = np.asarray(cells.size) - labeled.sum(1)
        prop = self._kind.prop
        # the smallest proposal probability over each of the measure's cells' items
        q_unl = np.full(n_cells, np.inf)
        np.minimum.at(q_unl, item_cell, np.asarray(prop.unl)[self._core.item_cell])
        q_lab = np.full((n_cells, c), np.inf)
        lab_q = np.asarray(prop.unl if self._stochastic else prop.lab)
        np.minimum.at(q_lab, item_cell, lab_q[self._core.item_cell] if lab_q.ndim == 2
                      else np.repeat(lab_q[self._core.item_cell][:, None], c, axis=1))
        covered = reuse_support(measure.g, cells.loss, unlabeled, labeled, q_unl, q_lab)
        feasible = unknown(len(measure.names), np)
        if measure.fractional and not self._stochastic and not self._skipped:
            feasible = np.asarray(feasible_range(measure.g, cells, labeled))
        return {"covered": covered, "feasible": feasible}

    def _draw_labels(self, k):
        """The label of each of the first ``k`` draws; −1 for a draw of a skipped item (none)."""
        if self._stochastic:
            return np.asarray([self._draw_label.get(d, -1) for d in range(k)], np.int64)
        return np.asarray([self._label_of.get(r, -1) for r in self._draws.row[:k]], np.int64)

    def intervals(self, level: float = 0.95, bayesian: bool = True, sequence: bool = False) -> pd.DataFrame:
        """Intervals per component: the CLT interval Ĝ ± z sd (delta method, 001 §3.3.2),
        with ``sequence=True`` the confidence sequence (kind ``clt-cs``, first: the interval
        to stop on when looking after every stage, :meth:`confidence_sequence`) and, under a
        deterministic oracle (every design), the Bayesian interval (:meth:`bayesian_interval`;
        its first computation in a process compiles the posterior sampler, which takes a
        while — ``bayesian=False`` skips it).
        Columns: component, kind, level, estimate, lower, upper."""
        v, sd = self._values()
        z = _z(level)
        lo, hi = self._cut(v - z * sd, v + z * sd)
        df = pd.DataFrame({"component": self._names, "kind": "clt", "level": level, "estimate": v, "lower": lo,
                           "upper": hi})
        if sequence:
            df = pd.concat([self.confidence_sequence(level), df], ignore_index=True)
        if bayesian:
            b = self.bayesian_interval(level)
            if b is not None:
                df = pd.concat([df, b.drop(columns="collapsed")], ignore_index=True)
        return df

    def confidence_sequence(self, level: float = 0.95, snap_index: int = -1) -> pd.DataFrame:
        """The asymptotic confidence sequence per component (kind ``clt-cs``):
        Ĝ ± cs_factor(n) sd after n draws (labels for Poisson rounds),
        :func:`bayes_eval.estimators.confidence_sequence` (Howard et al. 2021; Waudby-Smith
        et al. 2024): widened for looking after every stage, where the fixed-n CLT interval
        is for one budget.  Measured (``benchmarks/results/stopping.md``): at fixed budgets it
        covers 0.91-0.99 with ais on abt-buy and dblp-acm (width 4-6 × RMSE), but a run that
        stops when it is narrow covers only 0.67-0.98: positives not found yet make the
        interval narrow and the estimate wrong together.
        Undefined (NaN) until the labels hold at least ``MIN_CLASS_LABELS`` items of every
        class: before that no CLT-based interval can be trusted."""
        from .estimators import cs_factor
        from .results import MIN_CLASS_LABELS

        v, sd = self._values(snap_index)
        snap = self._snapshot(snap_index)
        n = max(float(snap.draws if snap else 0), 1.0)
        half = float(cs_factor(n, level)) * sd
        if self.labels_per_class(snap_index).min() < MIN_CLASS_LABELS:
            half = np.full_like(half, np.nan)
        lo, hi = self._cut(v - half, v + half, snap_index)
        return pd.DataFrame({"component": self._names, "kind": "clt-cs", "level": level, "estimate": v, "lower": lo,
                             "upper": hi})

    def _snapshot(self, snap_index: int = -1):
        """The closed stage ``snap_index`` (Python-style index), None before the first."""
        return self._snapshots[snap_index % len(self._snapshots)] if self._snapshots else None

    def labels_per_class(self, snap_index: int = -1) -> np.ndarray:
        """(C,) the labels of each class that the estimate at ``snap_index`` rests on."""
        snap = self._snapshot(snap_index)
        return np.asarray(snap.labeled if snap else self._labeled).sum(0)

    def posterior_model(self):
        """The oracle model behind the Bayesian interval, chosen as
        :func:`~bayes_eval.simulate.run_simulation` chooses it (``posterior_model``,
        default ``"calibrated"``: the calibrated Beta-binomial model for binary pools,
        whose finite-pool intervals hold where the Dirichlet tree's do not; ``"design"``:
        the design's own model, or for a design without one the model AIS would use).
        Every design has one (the posterior needs only the labeled counts per cell,
        whatever chose the items: the selection is ignorable, 001 §4.2)."""
        return core_posterior_model(self._core, self.config)

    def posterior(self, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None, snap_index: int = -1) -> np.ndarray | None:
        """Draws (n, m) of every component of G on this pool, or None.

        The Bayesian finite-pool posterior (``docs/architecture.md``, "Intervals"), for every
        design and either oracle (a stochastic oracle's: of its expected answer, the labels counted as
        observations, :func:`bayes_eval.posterior.complete_pool_draws`; stop 75).  It is
        :func:`bayes_eval.posterior.finite_pool_posterior` given the labels of the closed
        stages, with :meth:`posterior_model` fitted to them — the recipe of the
        simulation's Bayesian intervals.  The same key serves every measure, so the draws
        of different measures come from the same completed pools.  For NUTS, ArviZ
        diagnostics and posterior predictive checks see
        :func:`bayes_eval.report.report_from_session`.  ``snap_index``: after an earlier
        closed stage (the labels it held; -1, the last, by default).
        """
        model = self.posterior_model()
        if model is None:
            return None
        key, i, last = self._snap_key(n_draws, seed, snap_index)
        seed = self.seed if seed is None else int(seed)
        if key in self._post_cache:
            return self._post_cache[key][0]
        # a stochastic oracle's tallies count label observations: the posterior of the oracle's
        # expected answer, nothing to complete (posterior.complete_pool_draws)
        fn = posterior_sampler(self._core, model, self.measures, self.config.get("posterior_model") or "calibrated",
                               n_draws, observations=self._stochastic)
        labeled = self._labeled if i == last else self._snapshots[i].labeled
        rkey = jax.random.fold_in(jax.random.PRNGKey(seed), i + 1)
        draws, one_item, ess = fn(rkey, jnp.asarray(labeled))
        draws = np.asarray(draws)
        self._post_cache[key] = (draws, np.asarray(one_item), float(ess))
        return draws

    def posterior_sampler_ess(self, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None, snap_index: int = -1):
        """The importance ESS behind :meth:`posterior`'s parameter draws
        (:attr:`bayes_eval.posterior.PosteriorDraws.sampler_ess`): None where there is no
        posterior or its sampler is exact (the Dirichlet tree's Gibbs sampler).  Below
        :data:`bayes_eval.posterior.LOW_SAMPLER_ESS` the Bayesian interval rests on a handful
        of parameter values and ``session status`` says so."""
        if self.posterior(n_draws, seed, snap_index) is None:
            return None
        ess = self._post_cache[self._snap_key(n_draws, seed, snap_index)[0]][2]
        return ess if np.isfinite(ess) else None

    def bayesian_interval(self, level: float = 0.95, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None,
                          snap_index: int = -1):
        """Bayesian intervals (:func:`bayes_eval.posterior.bayesian_interval`: highest-density on
        binary pools, equal-tailed with several classes) of every component from :meth:`posterior` (after
        closed stage ``snap_index``), or None where there is no posterior.  Columns as
        :meth:`intervals` (``kind="bayes"``, ``estimate`` = posterior median) and ``collapsed``:
        where the interval was narrower than what one unlabeled item's label can change while
        such an item is left, and is therefore widened to the values one unlabeled item's class
        away (:func:`bayes_eval.posterior.resolved_interval`, the simulation's interval too)."""
        draws = self.posterior(n_draws, seed, snap_index)
        if draws is None:
            return None
        lo, hi, col = self._resolved(level, snap_index, n_draws, seed)
        with np.errstate(all="ignore"):
            med = np.nanmedian(draws, axis=0) if np.isfinite(draws).any() else lo
        return pd.DataFrame({"component": self._names, "kind": "bayes", "level": level, "estimate": med,
                             "lower": lo, "upper": hi, "collapsed": col})

    def posterior_of(self, measure, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None) -> np.ndarray | None:
        """Draws (n, m) of the components of ``measure`` -- one the session was not created
        with, such as the report's PR curve -- on this pool given the labels of the closed
        stages, or None where :meth:`posterior` is None (or the pool is partitioned).

        The recipe of :meth:`posterior` (the same model, fitted to the same labels, with the
        same key), counted on the measure's own cells so that G is exact on every completed
        pool (:func:`bayes_eval.session_core.measure_posterior`).  Labels ingested into the
        open stage are not in it, as they are not in the estimate."""
        from .measures import Measure
        from .posterior import labeled_table
        from .session_core import measure_posterior

        if not isinstance(measure, Measure):
            raise TypeError(f"measure must be a bayes_eval.measures.Measure, got {type(measure).__name__}")
        mp = measure_posterior(self._core, self.pool, self.measures, self.config, measure, n_draws,
                               observations=self._stochastic)
        if mp is None:
            return None
        if self._stochastic:  # every labeled draw of the closed stages is one observation of its cell
            k = self._snapshots[-1].draws if self._snapshots else 0
            rows, labels = np.asarray(self._draws.row[:k], np.int64), self._draw_labels(k)
            rows, labels = rows[labels >= 0], labels[labels >= 0]   # a skipped item's draws observe nothing
        else:
            rows, labels = self.labels_in_estimate()
        labeled = labeled_table(mp.item_cell, mp.n_cells, self._n_classes, rows, labels,
                                observations=self._stochastic)
        seed = self.seed if seed is None else int(seed)
        last = len(self._snapshots) - 1
        rkey = jax.random.fold_in(jax.random.PRNGKey(seed), last + 1)   # the key of posterior() after the last stage
        return np.asarray(mp.sample(rkey, jnp.asarray(labeled)))

    def labels_in_estimate(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, labels) of the items whose labels are in the estimate: labeled in a closed
        stage and not skipped (deterministic oracle; a stochastic oracle's labels are per
        draw -- empty arrays)."""
        if self._stochastic or not self._snapshots:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        last = self._snapshots[-1].stage
        rows = np.asarray(sorted(r for r, st in self._label_stage.items()
                                 if st <= last and r not in self._skipped), np.int64)
        return rows, np.asarray([self._label_of[int(r)] for r in rows], np.int64)

    def weight_stats(self) -> dict:
        """Effective sample size (Σw)²/Σw² and the largest weight of the draws so far."""
        ess = self._sum_w**2 / self._sum_w2 if self._sum_w2 > 0 else 0.0
        return {"ess": ess, "max_weight": self._max_w, "draws": self._n_draws}

    def summary(self, level: float = 0.95, bayesian: bool = False) -> pd.DataFrame:
        """One row per component: estimate, standard error, CLT interval, confidence sequence
        (``cs_lower``, ``cs_upper``: :meth:`confidence_sequence`), the CLT check, what the labels
        allow (and the Bayesian interval with ``bayesian=True``), labels, draws, ESS, largest
        weight."""
        v, sd = self._values()
        z = _z(level)
        measure_of = [m.name for m in self.measures for _ in m.names]
        ws = self.weight_stats()
        lo, hi = self._cut(v - z * sd, v + z * sd)
        cs = self.confidence_sequence(level)
        rng_ = self.feasible()
        rng_ = np.where(np.isfinite(rng_), rng_, np.nan)   # NaN: not computed
        df = pd.DataFrame({"measure": measure_of, "component": self._names, "estimate": v, "std_error": sd,
                           "clt_lower": lo, "clt_upper": hi,
                           "clt_check": self.clt_check(),  # NaN: no check for this design
                           # the confidence sequence (session status's interval where the check passes)
                           "cs_lower": cs["lower"].to_numpy(float), "cs_upper": cs["upper"].to_numpy(float),
                           # what the labels allow (bayes_eval.feasible)
                           "feasible_lower": rng_[0], "feasible_upper": rng_[1]})
        if bayesian:
            b = self.bayesian_interval(level)
            if b is not None:
                df["bayes_lower"] = b["lower"].to_numpy()
                df["bayes_upper"] = b["upper"].to_numpy()
                df["bayes_collapsed"] = b["collapsed"].to_numpy()  # widened: posterior.resolved_interval
                df["bayes_median"] = b["estimate"].to_numpy()      # the posterior median
        df["level"] = level
        df["labels"] = self._n_labels
        df["draws"] = ws["draws"]
        df["ess"] = ws["ess"]
        df["max_weight"] = ws["max_weight"]
        return df

    def history(self, level: float = 0.95) -> pd.DataFrame:
        """Every closed stage: labels and draws after it, ESS, largest weight, times, and
        the estimate, CLT interval (``lower``, ``upper``) and confidence sequence (``cs_lower``,
        ``cs_upper``: :meth:`confidence_sequence` after that stage, the interval the stopping rule
        reads where the CLT check passes) of each component (long format; the bounds clipped to a
        bounded measure's range, as :meth:`intervals`)."""
        z = _z(level)
        parts = []
        for i, s in enumerate(self._snapshots):
            v, sd = self._values(i)
            lo, hi = self._cut(v - z * sd, v + z * sd, i)
            cs = self.confidence_sequence(level, i)
            parts.append(pd.DataFrame({
                "stage": s.stage, "labels": s.labels, "draws": s.draws, "new_labels": s.n_new, "ess": s.ess,
                "max_weight": s.max_weight, "opened_at": s.opened_at, "closed_at": s.closed_at,
                "component": self._names, "estimate": v, "std_error": sd, "lower": lo, "upper": hi,
                "clt_check": self.clt_check(i), "cs_lower": cs["lower"].to_numpy(float),
                "cs_upper": cs["upper"].to_numpy(float)}))
        if not parts:
            return pd.DataFrame(columns=["stage", "labels", "draws", "new_labels", "ess", "max_weight", "opened_at",
                                         "closed_at", "component", "estimate", "std_error", "lower", "upper",
                                         "clt_check", "cs_lower", "cs_upper"])
        return pd.concat(parts, ignore_index=True)

    def labels(self) -> pd.DataFrame:
        """Every accepted label with its arrival time (from the session file): ``label`` is the
        label in force, ``corrected`` whether it was corrected after it arrived (``correct``;
        what arrived and each correction: :meth:`corrections`)."""
        rows = self._store.labels()
        df = pd.DataFrame(rows, columns=["id", "row", "item", "label", "draw", "stage", "ingest", "arrived_at"])
        # the last correction of each row (stochastic oracle: of each draw)
        key = "draw" if self._stochastic else "row"
        fixed = {int(r[9] if self._stochastic else r[1]): int(r[4]) for r in self._store.corrections()}
        df["corrected"] = df[key].map(lambda k: int(k) in fixed).astype(bool)
        if fixed:
            df["label"] = [fixed.get(int(k), int(v)) for k, v in zip(df[key], df["label"])]
        return df

    def draws(self) -> pd.DataFrame:
        """Every draw: stage, item, whether it asked for a label, q and weight."""
        rows = self._store.draws()
        return pd.DataFrame(rows, columns=["draw", "stage", "row", "item", "new", "q", "weight"])

    def _snap_key(self, n_draws: int, seed: int | None, snap_index: int):
        """(cache key of :meth:`posterior`, closed-stage index, last index)."""
        seed = self.seed if seed is None else int(seed)
        last = len(self._snapshots) - 1
        i = snap_index % len(self._snapshots) if self._snapshots else last
        return (int(n_draws), seed, i), i, last   # a closed stage's labels never change: keyed by its index

    def plot_progress(self, path: str | None = None, components=None, level: float = 0.95, bayesian: bool = False):
        """Estimate, CLT interval and confidence sequence against labels spent (PNG via matplotlib's Agg).

        ``components`` defaults to the first measure's first component (up to four may
        be given); ``bayesian=True`` adds the current Bayesian interval (designs with an
        oracle model).  Returns the path written, or the Figure when ``path`` is None.
        """
        from . import plots

        return plots.plot_progress(self, path, components, level, bayesian)

    def _drop_old_posteriors(self):
        """When a stage closes: the posteriors of earlier stages stay valid (keyed by stage
        index); keep those a stopping rule reads again (bayes-stable: the last
        :data:`~bayes_eval.results.STABLE_STAGES`) and drop older ones, which can be large."""
        from .results import STABLE_STAGES

        keep = max(len(self._snapshots) - STABLE_STAGES - 1, 0)
        for k in [k for k in self._post_cache if k[-1] < keep]:
            del self._post_cache[k]

    def _one_item(self, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None, snap_index: int = -1) -> np.ndarray:
        """(2, m): each component's range one unlabeled item's class away from the median
        completion (:func:`bayes_eval.posterior.one_item_range`), from :meth:`posterior`'s draws."""
        self.posterior(n_draws, seed, snap_index)
        return self._post_cache[self._snap_key(n_draws, seed, snap_index)[0]][1]

    def _resolved(self, level: float, snap_index: int = -1, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None):
        """(lower, upper, widened), each (m,): the Bayesian interval of each component
        after closed stage ``snap_index``, widened where it is narrower than what one unlabeled
        item's label can change while such an item is left
        (:func:`bayes_eval.posterior.widen_to_resolution`, with each measure's loss) -- the
        simulation's interval, :func:`bayes_eval.posterior.resolved_interval`.  None where there
        is no posterior."""
        draws = self.posterior(n_draws, seed, snap_index)
        if draws is None:
            return None
        key, i, last = self._snap_key(n_draws, seed, snap_index)
        rkey = ("resolved", float(level)) + key
        if rkey not in self._post_cache:     # status, the report and the stopping rule each ask for it
            labeled = self._labeled if i == last else self._snapshots[i].labeled
            with np.errstate(all="ignore"):
                # a stochastic oracle's posterior is continuous in π: no one-item resolution to widen to
                out = resolved_program(self._core, float(level), bool(self._snapshots) and not self._stochastic)(
                    jnp.asarray(draws), jnp.asarray(labeled), jnp.asarray(self._one_item(n_draws, seed, snap_index)))
            self._post_cache[rkey] = tuple(np.asarray(a) for a in out)
        return self._post_cache[rkey]

    def _collapsed(self, level: float, snap_index: int = -1, n_draws: int = SESSION_BAYES_DRAWS, seed: int | None = None) -> np.ndarray:
        """(m,) bool: where :meth:`_resolved` widened the Bayesian interval (``bayes_collapsed``);
        all False where there is no posterior."""
        r = self._resolved(level, snap_index, n_draws, seed)
        return np.zeros(len(self._names), bool) if r is None else r[2]

    @property
    def fully_labeled(self) -> bool:
        """Deterministic oracle: every item of the pool has a label in a closed stage, so
        nothing is left to label (``next_batch`` comes back empty)."""
        return (not self._stochastic and bool(self._snapshots)
                and int(round(float(np.sum(self._labeled)))) == int(self.pool.n_items))

    def exact_values(self) -> pd.Series | None:
        """The measures' values on the pool computed from the labels when every item is
        labeled (:attr:`fully_labeled`): no sampling error, whatever the design's estimate
        says.  None otherwise."""
        if not self.fully_labeled:
            return None
        core = self._core
        vals = []
        for j, m in enumerate(self.measures):
            r = np.einsum("xc,x,xcd->d", self._labeled, np.asarray(core.p_cell), np.asarray(core.loss_tables[j]))
            vals.append(np.atleast_1d(np.asarray(m.g(jnp.asarray(r)), np.float64)))
        return pd.Series(np.concatenate(vals), index=self._names, name="exact")

    def _exact_note(self) -> str | None:
        """Why nothing more needs labeling, or None: every item labeled, or a Poisson
        round that labeled every item that can matter."""
        if self.fully_labeled:
            return (f"every item of the pool ({int(self.pool.n_items):,}) is labeled: the value on the pool is "
                    f"known exactly; nothing more to label")
        if self._kind.is_exact(self._labeled):
            return "every item that can matter is labeled: the estimate is exact; nothing more to label"
        return None

    def status(self, target_width: float | None = None, level: float = 0.95, bayesian: bool | str = "auto") -> dict:
        """A JSON-ready summary of the session (what ``bayes-eval session status`` shows).

        ``labels`` counts every accepted label (the budget spent, an open batch's
        partial labels included); ``labels_in_estimate`` those of the closed stages,
        which the estimate and intervals rest on.  ``bayesian``: add the Bayesian interval
        (True), not (False: faster, no posterior), or ``"auto"`` (the default, as on the
        command line): where the CLT check fails or has nothing to check, for a design with a
        posterior (:meth:`posterior_model`; deterministic oracle) once a stage has closed.
        ``headline_interval`` names the interval to read first (issue 15, item 4), the one
        ``target_width``'s rule (:meth:`stopping`) reads: ``"bayes"`` where it was computed and
        the check fails, has nothing to check, or ``bayesian=True``; else ``"clt-cs"``, the
        confidence sequence.  Where the check passes the confidence sequence held the truth in
        0.99-1.00 of runs on every pool measured, the Bayesian interval, 1.6-3.8 × narrower, in
        0.82-0.98 with AIS on pools whose positive rate is no logistic curve of the score
        (0.46-0.89 before the curve's band offsets; ``benchmarks/results/misspecified.md``).  ``bayesian_auto`` says whether ``"auto"``
        turned the Bayesian interval on.
        """
        requested = bayesian
        if bayesian == "auto":
            bayesian = bool(self._snapshots) and self._bayes_read_first("auto")
        chk = self.clt_check()
        iv = self.intervals(level, bayesian=bool(bayesian), sequence=True)
        v, sd = self._values()
        rng_ = self.feasible()
        comps = []
        far = [m.name in {n for n, _ in self.unreached} for m in self.measures for _ in m.names]
        for k, name in enumerate(self._names):
            row = {"component": name, "estimate": _f(v[k]), "std_error": _f(sd[k]), **({"unreached": True} if far[k] else {})}
            if np.isfinite(rng_[:2, k]).all():
                # what the labels allow: the component over every completion of the pool (bayes_eval.feasible)
                row["feasible_lower"], row["feasible_upper"] = _f(rng_[0, k]), _f(rng_[1, k])
            if np.isfinite(chk[k]) or chk[k] == np.inf:
                # the model-assisted variance's check (estimators.model_assisted)
                row["clt_check"] = float(chk[k]) if np.isfinite(chk[k]) else None
                row["clt_reliable"] = bool(chk[k] <= MODEL_CHECK_MAX)
            for kind, key in (("clt-cs", "cs"), ("clt", "clt"), ("bayes", "bayes")):
                sel = iv[(iv["component"] == name) & (iv["kind"] == kind)]
                if len(sel):
                    row[f"{key}_lower"] = _f(sel["lower"].iloc[0])
                    row[f"{key}_upper"] = _f(sel["upper"].iloc[0])
                    if kind == "bayes":
                        row["bayes_median"] = _f(sel["estimate"].iloc[0])  # the posterior median
            comps.append(row)
        ws = self.weight_stats()
        out = {
            "session": self.path,
            "pool": self.config["pool"],
            "measures": [m.name for m in self.measures],
            **({"unreached_measures": [{"measure": n, "items": k} for n, k in self.unreached]} if self.unreached else {}),
            "design": self.design_name,
            "oracle": self.oracle,
            "seed": self.seed,
            "stages": self.n_stages,
            "labels": self.n_labels,
            "labels_in_estimate": self._n_labels,
            "pending": self.n_pending,
            "draws": ws["draws"],
            "ess": _f(ws["ess"]),
            "max_weight": _f(ws["max_weight"]),
            "level": level,
            "estimates": comps,
            # per class, the labels the estimate rests on: the confidence sequence waits for
            # MIN_CLASS_LABELS of every class (confidence_sequence)
            "labels_per_class": [int(x) for x in self.labels_per_class()],
            # the label map's name of each class (the first, where several map to one), or null
            "class_names": self.class_names,
        }
        has_bayes = any("bayes_lower" in c for c in comps)
        sampler_ess = self.posterior_sampler_ess() if has_bayes else None
        if sampler_ess is not None:
            # the calibrated model's sampler (importance resampling): a low ESS makes the interval one guess
            out["posterior_sampler_ess"] = sampler_ess
        if has_bayes:
            # a Bayesian interval that is one completed pool's value, with items left that can change
            # it: the model's bet that nothing is hidden (posterior.collapsed; issue 15, item 3)
            for row, col in zip(comps, self._collapsed(level)):
                if "bayes_lower" in row:
                    row["bayes_collapsed"] = bool(col)
        out["headline_interval"] = "bayes" if has_bayes and self._bayes_read_first(requested) else "clt-cs"
        out["bayesian_auto"] = bool(requested == "auto" and bayesian)
        out["posterior_available"] = self.posterior_model() is not None
        out["skipped"] = len(self._skipped)  # items nobody can label (session_skip)
        out["corrections"] = self._store.n_corrections()  # labels corrected after they arrived (session_corrections)
        if self._skipped:
            # each interval shown says what it is of: the Bayesian one completes the whole pool (skip_summary)
            out["skipped_note"] = (f"{len(self._skipped)} item(s) skipped as impossible to label: the estimate"
                                   + (", the confidence sequence and the CLT interval are" if has_bayes else
                                      " and its CLT-based intervals are")
                                   + " of the measure on the items that can be labeled (the skipped ones are left out)"
                                   + ("; the Bayesian interval is of the measure on the whole pool, skipped items "
                                      "included (their labels drawn from the oracle model)" if has_bayes else ""))
        out.update(self._kind.status_info(self.config["design"], self._labeled))
        # what the labels have barely seen, and what a doubling of the positives there would do (no model)
        exact = self.exact_values()
        bs = None if exact is not None else self.blind_spot()
        if bs is not None:
            # does the interval read first hold the value with them? (else it bets they are not there)
            key = "bayes" if out["headline_interval"] == "bayes" else "cs"
            bs["headline_holds"] = [None if v is None or c.get(f"{key}_lower") is None else
                                    bool(c[f"{key}_lower"] <= v <= c[f"{key}_upper"])
                                    for c, v in zip(comps, bs["values_if_hidden"])]
            out["blind_spot"] = bs
        out["fully_labeled"] = exact is not None
        if exact is not None:
            out["exact"] = {k: _f(v) for k, v in exact.items()}
        if target_width is not None:
            out["stopping"] = self.stopping(target_width, level, bayesian=requested)
        return out


    def skip_summary(self) -> dict | None:
        """What the skipped items (:mod:`bayes_eval.session_skip`) do to the report, or None
        when nothing was skipped: ``n`` items, ``note`` (what the estimate then measures),
        ``items`` (:meth:`skipped`: item, stage, reason, at), ``by_stage`` {stage: count},
        ``caveats`` (the stratified design's missing-at-random reading) and ``bayesian``
        (what the Bayesian interval measures instead)."""
        if not self._skipped:
            return None
        items = self.skipped()
        note = (f"{len(self._skipped)} item(s) were skipped as impossible to label. The estimates and CLT intervals "
                f"are of the measure on the items that can be labeled: a skipped item's draws count as draws "
                f"outside that population (they add nothing to the weighted sums, and the number of draws is scaled "
                f"by the estimated share of the pool that can be labeled), so the skipped items — and the "
                f"unlabelable items never drawn — are left out of the measure.")
        caveats = []
        if self.design_name == "stratified":
            caveats.append("The stratified design's post-stratified estimator weights each stratum by its whole "
                           "mass, so here a skipped item is treated as missing at random within its stratum.")
        return {"n": len(self._skipped), "note": note, "items": items,
                "by_stage": {int(k): int(v) for k, v in items["stage"].value_counts().sort_index().items()},
                "caveats": caveats,
                "bayesian": ("The Bayesian interval completes the whole pool, skipped items included (their labels "
                             "drawn from the oracle model): it is of the measure on every item, not only the "
                             "labelable ones.")}


def _z(level: float) -> float:
    """z_{(1+level)/2}, the normal quantile of a two-sided ``level`` interval."""
    if not 0 < level < 1:
        raise SessionError(f"level must be in (0, 1), got {level}", cli=f"--level must be in (0, 1), got {level}")
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + level / 2)


def _f(v):
    v = float(v)
    return v if math.isfinite(v) else None
