"""The oracle models by name: the one registry that the CLI, sessions, simulations,
benchmarks and reports build their models from (``docs/architecture.md``).

Every model is an :class:`~bayes_eval.models.oracle.OracleModel` over the score
strata, built from ``leaf_probs`` (K, C), the classifier's mean class probabilities per
stratum (001 §5.2):

=====================  ==========================================================  =======
name                   model                                                        classes
=====================  ==========================================================  =======
``dirichlet-tree``     the hierarchical Dirichlet tree of 001 §4 (``--depth``,       any
                       ``--branching``; depth 1 is the flat tree, "Ours-1")
``flat``               the depth-1 tree, branching = K                              any
``independent``        a Dirichlet per stratum (the non-hierarchical baseline)      any
``classifier``         the classifier's probabilities, never updated                any
``calibrated``         the Beta-binomial model with a logistic recalibration of     any
                       the scores and band offsets (``models/calibrated.py``);
                       with C > 2 its top-class split
                       (``models/calibrated_classes.py``)
=====================  ==========================================================  =======

Models with a full-posterior sampler for diagnostics (NUTS with its sampler statistics,
``bayes_eval.report``) also appear in :data:`POSTERIOR_SAMPLERS`
(``models/posterior_samplers.py``): ``calibrated`` (any number of classes) and ``dirichlet-tree``.

To add a model: write a factory ``(leaf_probs, **settings) -> OracleModel`` (the five
functions of the interface, jit-compatible) and add it to :data:`ORACLE_MODELS`;
``tests/test_architecture.py`` runs every registered model through the interface.
Models never import designs.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _config  # noqa: F401
from ..strata import tree_shape
from .calibrated import BANDS, POSTERIOR_PRIOR, SLOPE_SD, calibrated_model
from .calibrated_classes import calibrated_classes_model
from .oracle import classifier_scores, dirichlet_tree, flat_dirichlet_tree, independent_dirichlet

__all__ = ["ORACLE_MODELS", "oracle_model_names", "make_oracle_model", "make_companion_model", "COMPANIONS",
           "POSTERIOR_SAMPLERS", "posterior_sampler"]


def _tree(leaf_probs, depth=8, branching=None, strength=1.0, em_iters=10):
    shape = tree_shape(int(np.asarray(leaf_probs).shape[0]), depth, branching)
    return dirichlet_tree(leaf_probs, depth=shape.depth, branching=shape.branching, strength=strength,
                             em_iters=em_iters)


def _flat(leaf_probs, depth=8, branching=None, strength=1.0, em_iters=10):
    return flat_dirichlet_tree(leaf_probs, strength=strength)


def _independent(leaf_probs, depth=8, branching=None, strength=1.0, em_iters=10):
    return independent_dirichlet(leaf_probs, strength=strength)


def _classifier(leaf_probs, depth=8, branching=None, strength=1.0, em_iters=10):
    return classifier_scores(leaf_probs)


def _calibrated(leaf_probs, depth=8, branching=None, strength=1.0, em_iters=10):
    if np.asarray(leaf_probs).shape[1] == 2:
        return calibrated_model(leaf_probs, bands=BANDS, prior=POSTERIOR_PRIOR, slope_sd=SLOPE_SD)
    return calibrated_classes_model(leaf_probs, bands=BANDS)


#: name -> factory ``(leaf_probs, depth, branching, strength, em_iters) -> OracleModel``
ORACLE_MODELS: dict[str, Callable] = {
    "dirichlet-tree": _tree,
    "flat": _flat,
    "independent": _independent,
    "classifier": _classifier,
    "calibrated": _calibrated,
}
_ALIASES = {"tree": "dirichlet-tree", "flat-dirichlet-tree": "flat"}

#: companion models a design can mix with its oracle model (``bayes_eval.designs.sweep_share``)
COMPANIONS = ("calibrated",)


def oracle_model_names() -> list[str]:
    return list(ORACLE_MODELS)


def make_oracle_model(name: str, leaf_probs, *, depth: int = 8, branching: int | None = None,
                      strength: float = 1.0, em_iters: int = 10):
    """The oracle model ``name`` over strata with mean classifier probabilities
    ``leaf_probs`` (K, C).  ``depth``, ``branching``: the Dirichlet tree's shape (the
    smallest branching that fits K strata by default); ``strength``: weight of the
    scores in the prior; ``em_iters``: warm-started EM cycles per fit."""
    key = _ALIASES.get(name, name)
    if key not in ORACLE_MODELS:
        raise ValueError(f"unknown oracle model {name!r}; choose one of {oracle_model_names()}")
    return ORACLE_MODELS[key](leaf_probs, depth=depth, branching=branching, strength=strength, em_iters=em_iters)


def make_companion_model(name: str, leaf_probs, fit_iters: int = 2):
    """The companion model of a mixture design: ``"calibrated"``, refitted with
    ``fit_iters`` warm-started Newton steps per stage (binary pools).  It keeps the
    two-parameter curve (no band offsets): a proposal needs a smooth rate, and its fit runs
    after every stage."""
    if name not in COMPANIONS:
        raise ValueError(f"unknown companion model {name!r}; choose one of {COMPANIONS}")
    if np.asarray(leaf_probs).shape[1] != 2:
        raise ValueError("the calibrated companion model is binary only")
    return calibrated_model(leaf_probs, fit_iters=fit_iters)


#: name -> (full-posterior sampler of ``models/posterior_samplers.py``, classes it supports or None)
POSTERIOR_SAMPLERS: dict[str, tuple] = {
    "calibrated": ("calibrated_draws", None),
    "dirichlet-tree": ("tree_draws", None),
}


def posterior_sampler(name: str, n_classes: int) -> Callable:
    """The full-posterior sampler of the oracle model ``name`` (for the report's
    diagnostics), checked against the pool's number of classes."""
    from . import posterior_samplers

    key = _ALIASES.get(name, name)
    if key not in POSTERIOR_SAMPLERS:
        raise ValueError(f"model must be one of {tuple(POSTERIOR_SAMPLERS)}, got {name!r}")
    fn, classes = POSTERIOR_SAMPLERS[key]
    if classes is not None and classes != n_classes:
        raise ValueError(f"the {key} model is binary (C = {classes}); this pool has C = {n_classes}: "
                         f"use model='dirichlet-tree'")
    return getattr(posterior_samplers, fn)
