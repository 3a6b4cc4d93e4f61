"""NumPyro oracle-response models (installed as ``bayes_eval.models``)."""
from .. import _config  # noqa: F401

from .dirichlet_tree import (
    DirichletTreeParams,
    DirichletTreePrior,
    IndependentDirichletState,
    OracleModel,
    TreeSpec,
    classifier_scores,
    dirichlet_tree,
    dirichlet_tree_model,
    draw_unlabeled_counts,
    em,
    flat_dirichlet_tree,
    gibbs,
    independent_dirichlet,
    log_posterior,
    map_from_counts,
    params_from_samples,
    posterior_from_counts,
    predictive,
    prior_from_scores,
    prior_mode,
    run_nuts,
)
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
