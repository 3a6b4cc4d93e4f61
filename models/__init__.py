"""NumPyro oracle-response models (installed as ``bayes_eval.models``)."""
from .. import _config  # noqa: F401

__all__: list[str] = []
