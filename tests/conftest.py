import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("MPLBACKEND", "Agg")
# the CLI commands run in-process here: no persistent compilation cache written to the home folder
os.environ.setdefault("BAYES_EVAL_CACHE_DIR", "")

import sys  # noqa: E402


def _selects_slow(argv) -> bool:
    """Whether the command line's -m expression picks the slow tier (``-m slow``)."""
    for i, a in enumerate(argv):
        expr = argv[i + 1] if a == "-m" and i + 1 < len(argv) else (a[3:] if a.startswith("-m=") else None)
        if expr is not None and "slow" in expr and "not slow" not in expr:
            return True
    return False


# The default tier compiles fast rather than runs fast: about 70% of its time is XLA compiling
# (stop 61: 732 s compiling, 229 s lowering, of ~1,550 s of test time; 6,524 compiles).  So
# it compiles with XLA's backend (LLVM) optimization level 0 (stop 35: the tier 666 -> 535 s)
# and LLVM's expensive passes off (stop 61: three posterior-heavy test files 160 -> 120 s on two
# workers).  The compiled code runs slower; its numerics are the same HLO's (the goldens
# recorded at the default level pass unchanged).  Measured and not kept:
# --xla_cpu_use_fusion_emitters=false (XLA's older loop emitters) compiled faster still (102 s)
# but changed results -- NUTS chains that no longer mixed (R-hat 2.1), a projected estimate
# no closer to the truth.  The slow tier (long runs of compiled code) keeps XLA's defaults, as
# do the benchmarks and the CLI; BAYES_EVAL_TEST_XLA_OPT=default keeps them here too, and an
# XLA_FLAGS that sets the level wins.  XLA aborts on a flag it does not know, so the flags are
# first tried in a child process (once, in the process that starts the run; the xdist workers
# inherit XLA_FLAGS); a jaxlib without the second gets the level alone.
FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")


def _xla_accepts(flags) -> bool:
    """Whether a JAX process with XLA_FLAGS + ``flags`` compiles and runs a program."""
    import subprocess

    env = dict(os.environ, XLA_FLAGS=" ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip())
    try:
        r = subprocess.run([sys.executable, "-c", "import jax, jax.numpy as jnp; jax.jit(jnp.sin)(jnp.ones(3)).block_until_ready()"],
                           env=env, capture_output=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


if (os.environ.get("BAYES_EVAL_TEST_XLA_OPT", "0") == "0" and not _selects_slow(sys.argv)
        and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "")):
    _flags = FAST_COMPILE_FLAGS if _xla_accepts(FAST_COMPILE_FLAGS) else FAST_COMPILE_FLAGS[:1]
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *_flags]).strip()


import shutil  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import bayes_eval  # noqa: E402,F401  (enables x64)

# One JAX compilation cache for the whole test run, in a temporary folder that the process
# which made it (the xdist controller, or the one process with -n 0) removes at the end; the
# workers inherit its path.  Tests build the same programs over and over (a demo pool's
# session, its posterior sampler) in fresh closures, and what one test or worker compiled
# the others load instead of compiling again -- the CLI's own cache (bayes_eval._config),
# confined to this run.  BAYES_EVAL_TEST_CACHE=0 turns it off.
_RUN_CACHE_OWNER = False
if os.environ.get("BAYES_EVAL_TEST_CACHE", "1") != "0":
    if not os.environ.get("BAYES_EVAL_TEST_JAX_CACHE"):
        os.environ["BAYES_EVAL_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="bayes_eval-test-jax-")
        _RUN_CACHE_OWNER = True
    import jax  # noqa: E402

    jax.config.update("jax_compilation_cache_dir", os.environ["BAYES_EVAL_TEST_JAX_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def pytest_sessionfinish(session, exitstatus):
    if _RUN_CACHE_OWNER and not hasattr(session.config, "workerinput"):
        shutil.rmtree(os.environ["BAYES_EVAL_TEST_JAX_CACHE"], ignore_errors=True)


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


def computed_once_per_run(name, compute):
    """``compute()``, computed once per test run however many xdist workers ask: the first
    pickles its result into the run's cache folder (under a file lock, which the others wait
    on) and the others load it.  With ``--dist loadfile`` the test files that share a
    session fixture land on different workers, each of which would otherwise compute it
    again.  The file is named by xdist's id of this run, so a cache folder kept between runs
    (``BAYES_EVAL_TEST_JAX_CACHE`` set by hand) never serves a result of older code.  Without
    xdist or the run's cache folder (``BAYES_EVAL_TEST_CACHE=0``) it is computed here."""
    folder = os.environ.get("BAYES_EVAL_TEST_JAX_CACHE")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not folder or not run or not os.path.isdir(folder):
        return compute()
    import fcntl
    import pickle

    import jax

    path = os.path.join(folder, f"fixture-{name}-{run}.pickle")
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(path):
            with open(path, "rb") as f:
                return pickle.load(f)
        result = jax.tree_util.tree_map(lambda a: np.asarray(a) if isinstance(a, jax.Array) else a, compute())
        with open(path + ".tmp", "wb") as f:
            pickle.dump(result, f)
        os.replace(path + ".tmp", path)
        return result


@pytest.fixture(scope="session")
def ais_many_positives():
    """200 AIS runs (F1, budget 400, checkpoints 200 / 400) on a 4,000-item pool with 30%
    positives, where a CLT can hold: shared by the interval tests (one compilation, and
    one computation per run: :func:`computed_once_per_run`)."""
    from bayes_eval.registry import measure_from_args
    from bayes_eval.simulate import run_simulation

    def compute():
        pool = bayes_eval.demo_pool(n_items=4000, positive_rate=0.3, seed=1)
        res, _ = run_simulation(pool, measure_from_args("f1", pool), "ais", budget=400, batch=50, repeats=200,
                                seed=0, checkpoints=(200, 400), bayes=False, track_kl=False)
        return res

    return computed_once_per_run("ais_many_positives", compute)


def calibrated_prior_curve(z, groups=None, n_groups=None, band_scale=None):
    """A draw of the calibrated posterior model's curve from its prior (``models/calibrated.py``:
    ``POSTERIOR_PRIOR`` for (a, b, log κ), the band offsets d a Gaussian walk over ``BANDS`` bands of scale ``BAND_SCALE`` (or uniform over its grid),
    and with ``groups`` (the units' top classes) one offset per group, N(0, ``GROUP_SCALE``²)):
    a function of (three keys for a, b, log κ; a key for the offsets) -> (μ per unit, κ), for the
    simulation-based calibration of the binary model (``test_posterior.py``) and of its top split
    for several classes (``test_several_classes.py``, ``band_scale`` its ``TOP_BAND_SCALE``)."""
    import jax
    import jax.numpy as jnp

    from bayes_eval.models import calibrated as cal

    scales = jnp.asarray(cal.group_scale_grid())
    band_scales = jnp.asarray(cal.band_scale_grid(band_scale))
    curve = cal.make_curve(np.asarray(z), cal.BANDS, scale=1.0, groups=groups, n_groups=n_groups, group_scale=1.0)
    walk = jnp.linalg.cholesky(jnp.linalg.inv(curve.precision))   # d = walk @ N(0, I) ~ N(0, Q⁻¹)
    prior = cal.prior_rows(cal.POSTERIOR_PRIOR)
    m, m_g = curve.precision.shape[0], cal.n_group_offsets(curve)
    # the offsets at scale 1, then times the walk's scale s and the groups' τ: BAND_SCALE and
    # GROUP_SCALE, or each uniform over its grid
    group_part = jnp.arange(m) >= m - m_g

    def draw(keys_abk, key_d):
        a, b, lk = (mu + s * jax.random.normal(kk) for (mu, s), kk in zip(prior, keys_abk))
        tau = scales[jax.random.randint(jax.random.fold_in(key_d, 7), (), 0, scales.size)]
        s_band = band_scales[jax.random.randint(jax.random.fold_in(key_d, 8), (), 0, band_scales.size)]
        d = (walk @ jax.random.normal(key_d, (m,))) * jnp.where(group_part, tau, s_band)
        eta = cal.curve_eta(jnp.concatenate([jnp.stack([a, b, lk]), d]), curve)
        return jnp.clip(jax.nn.sigmoid(eta), 1e-9, 1 - 1e-9), jnp.exp(lk)

    return draw
