"""bayes_eval: label-efficient evaluation of classifiers."""
from . import _config  # noqa: F401  (enables float64 before anything else touches JAX)

__all__: list[str] = []
