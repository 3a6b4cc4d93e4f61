"""The stopping rule of ``session status --target-width`` (:class:`SessionStopping`, a mixin of
:class:`bayes_eval.session.Session`): whether the interval read first is narrow enough, and how many
more labels that is expected to take -- the session's side of :func:`bayes_eval.results.stopping`
(issue 15, items 3 and 4)."""
from __future__ import annotations

import numpy as np

from .errors import SessionError
from .estimators import MODEL_CHECK_MAX


class SessionStopping:
    """``Session.stopping`` and the rules it reads (``read-first``, ``bayes-checked``, ``bayes``,
    ``bayes-stable``, ``clt-cs``)."""

    def stopping(self, target_width: float, level: float = 0.95, bayesian: bool | str = "auto") -> dict:
        """Whether the ``level`` interval is narrower than ``target_width``, and how many
        more labels that is expected to take: the rule of ``session status --target-width``,
        which reads the interval the status reads first (issue 15, item 4; ``"rule"`` in the result).

        ``bayesian="auto"`` (the default, as on the command line; rule ``read-first``): for a
        session whose posterior is available (every design, since stop 73; deterministic oracle), the
        Bayesian rule below where the CLT check fails (or has nothing to check) and the confidence
        sequence where it passes -- there the Bayesian interval rests on the calibration curve and
        missed on pools whose positive rate is no logistic curve of the score
        (``benchmarks/results/misspecified.md``).  ``bayesian=True``: the Bayesian rule whatever
        the check.  The Bayesian rule (:meth:`bayes_stop_rule`) is, for ``ais`` under a
        deterministic oracle, ``bayes-checked`` (stop 87): the Bayesian interval of every component
        of the last closed stage at most ``target_width`` wide where the CLT check's ratio is at most
        :data:`~bayes_eval.results.STOP_CHECK_MAX` -- above it the draws have not yet reached where the
        calibrated model puts the estimate's variance, and on the demo pool the runs stopped there
        held the truth 0.69-0.89 of the time at W = 0.05 (``benchmarks/results/stopping_check_gate.md``);
        for ``poisson-adaptive`` (its companion's check recorded) ``bayes`` (stop 88): that interval at
        most ``target_width`` wide, with no gate (``benchmarks/results/stopping_stop88.md``);
        for the other designs ``bayes-stable``: the Bayesian interval of
        every component at most ``target_width`` wide after each of the last
        :data:`~bayes_eval.results.STABLE_STAGES` closed stages -- an interval that collapsed onto
        one completed-pool value counts at the width one unlabeled item can change
        (:meth:`bayesian_interval`) (issue 15, item 3: measured in
        ``benchmarks/results/stopping_rules_cells.md``: coverage at the stop 0.95-1.00 or no stop, on dblp-acm,
        abt-buy, the demo pool and a 10%-positive pool, where stopping on the posterior the
        first time it is narrow stopped wrong runs).  The labels still needed are
        extrapolated two ways (:func:`bayes_eval.results.labels_to_width`): width ∝ 1/sqrt(labels)
        from the current value (``more_labels``), and at the rate the same interval shrank since the
        closed stage nearest half the labels (``more_labels_observed_rate``, ``width_exponent``; one
        more interval computed) -- *extrapolations*, not promises.  Otherwise (``bayesian=False``,
        no posterior, or ``"auto"`` where the check passes) the interval is the confidence sequence
        (:meth:`confidence_sequence`, widened for looking after every stage) of the first
        measure's widest component, and a run may stop on it only where the CLT check passes.
        """
        if not target_width > 0:
            raise SessionError(f"the target width must be positive, got {target_width}",
                               cli=f"--target-width must be > 0, got {target_width}")
        exact = self._exact_note()
        if exact is not None:  # nothing left to label: the rule is met whatever the interval says
            return {"target_width": float(target_width), "level": level, "labels_in_estimate": self._n_labels,
                    "width": 0.0, "component": self._names[0], "kind": "exact", "reached": True, "more_labels": 0,
                    "exact": True, "note": exact}
        m0 = len(self.measures[0].names)
        first = set(self._names[:m0])
        out = {"target_width": float(target_width), "level": level, "labels_in_estimate": self._n_labels}
        if not self._stochastic:  # an extrapolation past them says "more than the pool holds"
            out["unlabeled_items"] = int(self.pool.n_items) - int(round(float(np.sum(self._labeled))))
        has_posterior = bayesian is not False and self.posterior_model() is not None
        bayes_rule = self.bayes_stop_rule() if has_posterior else None
        out["rule"] = (bayes_rule if bayesian is True else "read-first") if has_posterior else "clt-cs"
        if self._bayes_read_first(bayesian):
            if bayes_rule in ("bayes-checked", "bayes"):
                return self._stopping_at_last_stage(target_width, level, first, out, gated=bayes_rule == "bayes-checked")
            return self._stopping_stable(target_width, level, first, out)
        iv = self.intervals(level, bayesian=False, sequence=True)
        iv = iv[iv["kind"] != "clt"]
        iv = iv[iv["component"].isin(first)]
        width = (iv["upper"] - iv["lower"]).to_numpy()
        if not self._snapshots or not np.isfinite(width).any():
            out.update(width=None, component=None, kind=None, reached=False, more_labels=None,
                       note="the interval is not defined yet (it needs at least 10 labeled items of each class); "
                            "label more items")
            return out
        i = int(np.nanargmax(width))
        wmax = float(width[i])
        out.update(width=wmax, component=str(iv["component"].iloc[i]), kind=str(iv["kind"].iloc[i]))
        if wmax <= 0:
            out.update(reached=False, more_labels=None,
                       note="the interval has zero width (too few informative labels for the CLT); label more items")
            return out
        reached = wmax < target_width
        chk = self.clt_check()[:m0]           # the confidence sequence: only where the CLT check passes
        failed = [self._names[k] for k in range(m0) if chk[k] > MODEL_CHECK_MAX]
        out["clt_check_passed"] = not failed
        if failed and reached:
            # issue 15, item 3: a narrow CLT-based interval resting on positives not found yet
            out.update(reached=False, more_labels=None,
                       note=f"the interval is narrow enough, but the CLT check fails for {', '.join(failed[:4])} "
                            f"(positives may hide where the design draws few items): not a reason to stop; "
                            f"drop --no-bayesian (the rule then stops on the Bayesian interval)")
            return out
        out.update(self._labels_to_width(wmax, target_width, first, lambda h: self.confidence_sequence(level, h)),
                   reached=bool(reached), note="extrapolation: width assumed to shrink as 1/sqrt(labels) from the "
                                               "current width, and at the rate it shrank since about half the labels")
        return out

    def _labels_to_width(self, width: float, target: float, first: set, interval_at) -> dict:
        """:func:`bayes_eval.results.labels_to_width` from the current width and the width of the
        same interval (``interval_at(snap_index)``, the widest of the components ``first``) after the
        closed stage nearest half the labels (one more interval computed, only while ``width ≥
        target``)."""
        from .results import labels_to_width

        n = [s.labels for s in self._snapshots]
        h = int(np.argmin(np.abs(np.asarray(n, float) - self._n_labels / 2))) if n else -1
        then = None
        if width >= target and n and 0 < n[h] <= 0.75 * self._n_labels:
            iv = interval_at(h)
            iv = iv[iv["component"].isin(first)]
            w = (iv["upper"] - iv["lower"]).to_numpy(float)
            then = (n[h], float(np.nanmax(w))) if np.isfinite(w).any() else None
        return labels_to_width(self._n_labels, width, target, *(then or (None, None)))

    def bayes_stop_rule(self) -> str:
        """The Bayesian stopping rule of this session (:func:`bayes_eval.results.bayes_stop_rule`, as
        a simulation of the same design applies it): where the first measure's CLT check is recorded
        (a binary pool, a deterministic oracle, the calibrated companion: the check compares that model
        with the draws) ``"bayes-checked"`` for ``ais`` and ``"bayes"`` for ``poisson-adaptive``, else
        ``"bayes-stable"`` -- also before the first closed stage, when there is nothing to check yet."""
        from .results import bayes_stop_rule

        return bayes_stop_rule(self.design_name, self.clt_check()[:len(self.measures[0].names)])

    def _stopping_at_last_stage(self, target_width: float, level: float, first: set, out: dict,
                                gated: bool = True) -> dict:
        """:meth:`stopping`'s ``bayes-checked`` and ``bayes`` rules: the widest Bayesian interval of the
        first measure after the last closed stage, reached when it is narrower than ``target_width`` and
        the CLT check's ratio of every component of that measure is at most
        :data:`~bayes_eval.results.STOP_CHECK_MAX` (NaN: nothing to check, not held back); with
        ``gated=False`` the ``bayes`` rule (poisson-adaptive's, stop 88): narrow enough is reached."""
        from .results import STOP_CHECK_MAX

        kind = "bayes-checked" if gated else "bayes"
        m0 = len(first)
        if not self._snapshots:
            out.update(width=None, component=None, kind=kind, reached=False, more_labels=None,
                       note="the rule needs the Bayesian interval after a closed stage; label more items")
            return out
        wmax, comp, collapsed = self._widest_bayesian(level, first)
        if not np.isfinite(wmax):
            out.update(width=None, component=None, kind=kind, reached=False, more_labels=None,
                       note="the Bayesian interval is not defined; label more items")
            return out
        ratio = None
        if gated:
            chk = np.asarray(self.clt_check()[:m0], float)
            ratio = float(np.nanmax(chk)) if np.any(~np.isnan(chk)) else None
            out.update(check_ratio=ratio if ratio is None or np.isfinite(ratio) else None, check_max=STOP_CHECK_MAX)
        gate = ratio is None or ratio <= STOP_CHECK_MAX
        out.update(width=wmax, component=comp, kind=kind, collapsed=collapsed)
        ext = self._labels_to_width(wmax, target_width, first,
                                    lambda h: self.bayesian_interval(level, snap_index=h))
        narrow = wmax < target_width
        if narrow and not gate:     # narrow now, held back by the check: no count to give
            ext.update(more_labels=None, more_labels_observed_rate=None)
        out.update(ext)
        ratio_text = "" if ratio is None else "∞" if not np.isfinite(ratio) else f"{ratio:.3g}"
        if not narrow:
            note = ("extrapolation: width assumed to shrink as 1/sqrt(labels) from the current width, and at the "
                    "rate it shrank since about half the labels")
        elif not gate:
            note = (f"the Bayesian interval of {comp} is narrow enough (width {wmax:.4f}), but the CLT check's ratio "
                    f"is {ratio_text} > {STOP_CHECK_MAX:g}: the draws have not yet reached where the model puts the "
                    f"estimate's variance (positives may hide there), so not a reason to stop; label more items")
        else:
            note = (f"the Bayesian interval is narrower than {target_width:g}"
                    + (f" and the CLT check's ratio {ratio_text} ≤ {STOP_CHECK_MAX:g}" if ratio is not None else ""))
        out.update(reached=bool(narrow and gate), note=note)
        return out

    def _widest_bayesian(self, level: float, first: set, snap_index: int = -1):
        """(width, component, collapsed) of the widest Bayesian interval among the components ``first``
        after closed stage ``snap_index`` (width ∞ and component None where none is defined; collapsed:
        whether any was widened, :meth:`bayesian_interval`)."""
        b = self.bayesian_interval(level, snap_index=snap_index)
        b = b[b["component"].isin(first)]
        w = (b["upper"] - b["lower"]).to_numpy()
        collapsed = bool(b["collapsed"].any())
        if not np.isfinite(w).any():
            return np.inf, None, collapsed
        j = int(np.nanargmax(w))
        return float(w[j]), str(b["component"].iloc[j]), collapsed

    def _stopping_stable(self, target_width: float, level: float, first: set, out: dict) -> dict:
        """:meth:`stopping`'s ``bayes-stable`` rule: the widest Bayesian interval of the first
        measure after each of the last ``STABLE_STAGES`` closed stages (the posterior of each
        stage's labels), reached when every one is narrower than ``target_width``."""
        from .results import STABLE_STAGES

        k = STABLE_STAGES
        if len(self._snapshots) < k:
            out.update(width=None, component=None, kind="bayes-stable", reached=False, more_labels=None,
                       note=f"the rule needs the Bayesian interval after {k} closed stages; label more items")
            return out
        widths, comp, collapsed = [], None, False
        for i in range(-k, 0):
            w, c, col = self._widest_bayesian(level, first, snap_index=i)
            widths.append(w)
            comp, collapsed = c if c is not None else comp, collapsed or col
        wmax = widths[-1]
        out.update(width=wmax if np.isfinite(wmax) else None, component=comp, kind="bayes-stable",
                   stable_widths=[w if np.isfinite(w) else None for w in widths], collapsed=collapsed)
        if not np.isfinite(wmax):
            out.update(reached=False, more_labels=None, note="the Bayesian interval is not defined; label more items")
            return out
        reached = all(w < target_width for w in widths)
        ext = self._labels_to_width(wmax, target_width, first,
                                    lambda h: self.bayesian_interval(level, snap_index=h))
        if not reached and wmax < target_width:  # narrow now, not yet stable: no count to give
            ext.update(more_labels=None, more_labels_observed_rate=None)
        out.update(ext)
        note = ("extrapolation: width assumed to shrink as 1/sqrt(labels) from the current width, and at the rate "
                "it shrank since about half the labels"
                if wmax >= target_width else
                f"the Bayesian interval is narrow enough now but not yet after each of the last {k} stages "
                f"(label at least one more stage)" if not reached else
                f"the Bayesian interval has been narrower than {target_width:g} after each of the last {k} stages")
        out.update(reached=bool(reached), note=note)
        return out

    def _bayes_read_first(self, bayesian: bool | str = "auto") -> bool:
        """Whether the interval read first (and stopped on) is the Bayesian one: never with
        ``bayesian=False`` or without a posterior; always with ``True``; with ``"auto"`` where
        the CLT check fails for some component or has nothing to check (issue 15, item 4)."""
        if bayesian is False or self.posterior_model() is None:
            return False
        if bayesian is True:
            return True
        chk = self.clt_check()
        return bool(np.any(chk > MODEL_CHECK_MAX)) or not bool(np.any(np.isfinite(chk) | (chk == np.inf)))

