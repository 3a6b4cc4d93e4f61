"""NumPyro oracle-response models (installed as ``bayes_eval.models``).

``tree`` -- the hierarchical Dirichlet tree of 001 §4 (prior, EM / MAP, Gibbs);
``tree_nuts`` -- its NumPyro model and NUTS; ``calibrated`` -- the calibrated
Beta-binomial model; ``calibrated_classes`` -- its top-class split for several classes; ``oracle`` -- the ``OracleModel`` interface and the tree-family
models behind it; ``registry`` -- every model by name.  (The module of the tree is
``tree``, not ``dirichlet_tree``: that name is the model's factory, re-exported here.)
"""
from .. import _config  # noqa: F401

from .oracle import OracleModel, classifier_scores, dirichlet_tree, flat_dirichlet_tree, independent_dirichlet
from .tree import (
    DirichletTreeParams,
    DirichletTreePrior,
    IndependentDirichletState,
    TreeSpec,
    draw_unlabeled_counts,
    em,
    gibbs,
    log_posterior,
    map_from_counts,
    posterior_from_counts,
    predictive,
    prior_from_scores,
    prior_mode,
)
from .tree_nuts import dirichlet_tree_model, params_from_samples, run_nuts
from .registry import COMPANIONS, ORACLE_MODELS, make_companion_model, make_oracle_model, oracle_model_names

__all__: list[str] = [
    # Dirichlet-tree oracle model (001 §4) and alternatives behind one interface
    "TreeSpec",
    "DirichletTreePrior",
    "DirichletTreeParams",
    "IndependentDirichletState",
    "OracleModel",
    "prior_from_scores",
    "prior_mode",
    "predictive",
    "posterior_from_counts",
    "map_from_counts",
    "log_posterior",
    "em",
    "gibbs",
    "draw_unlabeled_counts",
    "dirichlet_tree_model",
    "run_nuts",
    "params_from_samples",
    "dirichlet_tree",
    "flat_dirichlet_tree",
    "independent_dirichlet",
    "classifier_scores",
    # the registry of oracle models by name
    "ORACLE_MODELS",
    "COMPANIONS",
    "oracle_model_names",
    "make_oracle_model",
    "make_companion_model",
]
