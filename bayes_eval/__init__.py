"""bayes_eval: label-efficient evaluation of classifiers.

Adaptive importance sampling for any generalized measure (seed 001, Marchant &
Rubinstein KDD'21) with a Bayesian Dirichlet-tree model of the oracle response in
NumPyro, static and Poisson designs (seeds 000, 002), CLT and Bayesian intervals.
"""
import os as _os

from . import _config  # noqa: F401  (enables float64 before anything else touches JAX)
from ._config import enable_compile_cache  # noqa: E402

# Running from a source checkout (``python -m pytest`` at the repository root): the
# NumPyro models live in the top-level ``models/`` folder, installed as
# ``bayes_eval.models``; make that import work from the source tree too.
_here = _os.path.dirname(_os.path.abspath(__file__))
_src_models = _os.path.join(_os.path.dirname(_here), "models", "registry.py")
if not _os.path.isdir(_os.path.join(_here, "models")) and _os.path.isfile(_src_models):
    __path__.append(_os.path.dirname(_here))  # noqa: F821

from .pool import Pool, PoolError, demo_pool  # noqa: E402
from .registry import load_pool  # noqa: E402
from . import measures  # noqa: E402
from .strata import Strata, stratify, csf_strata, uniform_strata, tree_shape  # noqa: E402
from .estimators import Estimate, is_estimate_draws, normal_interval, ellipsoid  # noqa: E402
from .simulate import run_simulation, simulate_runs, summarize  # noqa: E402
from .session import Session  # noqa: E402
from .store import SessionError  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Pool",
    "PoolError",
    "demo_pool",
    "load_pool",
    "measures",
    "Strata",
    "stratify",
    "csf_strata",
    "uniform_strata",
    "tree_shape",
    "Estimate",
    "is_estimate_draws",
    "normal_interval",
    "ellipsoid",
    "run_simulation",
    "simulate_runs",
    "summarize",
    "Session",
    "SessionError",
    "enable_compile_cache",
]
