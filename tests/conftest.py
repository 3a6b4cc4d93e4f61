import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# the CLI commands run in-process here: no persistent compilation cache written to the home folder
os.environ.setdefault("BAYES_EVAL_CACHE_DIR", "")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayes_eval  # noqa: E402,F401  (enables x64)


@pytest.fixture(autouse=True)
def _seed_everything():
    np.random.seed(12345)
    yield


SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")
SHARED_DATA = os.path.abspath(os.path.join(SHARED, "data"))


def shared_pool_path(name):
    path = os.path.join(SHARED_DATA, f"{name}.parquet")
    if not os.path.exists(path):
        pytest.skip(f"shared pool {name!r} not found at {path} (../shared is absent)")
    return path
