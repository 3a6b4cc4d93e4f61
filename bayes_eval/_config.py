"""Process-wide numerical configuration.

Importance weights reach 1e4-1e6 on imbalanced pools (``docs/architecture.md``, "Precision"), so
the package runs JAX in 64-bit mode.  This module is imported first by ``bayes_eval``.
"""
import jax

jax.config.update("jax_enable_x64", True)


def enable_compile_cache():
    """Reuse compiled programs across processes (JAX's persistent compilation cache): every
    ``bayes-eval`` command is a new process, and without it each one recompiles the design's
    step and the many small programs of building a design (``benchmarks/results/latency.md``).
    Every compilation is cached, however short (most are a few milliseconds, but a command
    runs dozens).  In a long-lived process (a notebook) it serves what JAX's in-memory caches
    miss: NumPyro 0.22 recompiles its sampling loop on every NUTS run of the report, even with
    the same settings (``docs/architecture.md``), and a refit loads it from here instead.
    ``BAYES_EVAL_CACHE_DIR`` chooses the folder (default ``$XDG_CACHE_HOME/bayes_eval/jax`` or
    ``~/.cache/bayes_eval/jax``); set it empty to disable.  A folder that cannot be made disables
    the cache silently (it is an optimisation, never needed).  Returns the folder in use (the
    caller's own where JAX already had one), or None where the cache is off."""
    import os

    d = os.environ.get("BAYES_EVAL_CACHE_DIR")
    if d is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "bayes_eval", "jax")
    try:
        if jax.config.jax_compilation_cache_dir:  # already configured by the caller
            return jax.config.jax_compilation_cache_dir
        if not d:
            return None
        os.makedirs(d, exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", d)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    except (OSError, AttributeError, ValueError):
        return None  # an optimisation only: without it every command compiles what it runs
    return d


#: The XLA backend optimization level below which :func:`jit_run_often` raises a program.
RUN_OFTEN_LEVEL = 1


def _asked_level() -> int | None:
    """The backend optimization level the process's ``XLA_FLAGS`` sets, the last one given (None:
    XLA's default, or a value that is no integer)."""
    import os

    level = None
    for flag in os.environ.get("XLA_FLAGS", "").split():
        if flag.startswith("--xla_backend_optimization_level="):
            value = flag.split("=", 1)[1]
            level = int(value) if value.lstrip("-").isdigit() else None
    return level


def jit_run_often(fun, **kw):
    """``jax.jit(fun, **kw)`` for a program that is compiled once and run many times (the
    finite-pool posterior a session computes at every ``status`` and, for a stopping rule, at
    every stage; the simulation's batch of posteriors): where the process asks XLA for a backend
    level below :data:`RUN_OFTEN_LEVEL` (``--xla_backend_optimization_level=0`` in ``XLA_FLAGS``,
    to compile fast: the default test tier does, ``tests/conftest.py``), this program is
    compiled at level 1 instead; at XLA's default level, or any level asked of 1 or more,
    it is plain ``jax.jit``.  Measured at stop 86 on a 4,000-item session (AIS, F1, the
    Bayesian stopping rule's posterior per stage, two other jobs sharing the two cores): level 0
    compiled and ran the first 12 stages' posteriors in 33-35 s and eight more in 15.5-15.8 s;
    level 1 in 26-32 s and 3.7-4.4 s (level 2: 28.6 s and 4.5 s)."""
    options = run_often_options()
    return jax.jit(fun, compiler_options=options, **kw) if options else jax.jit(fun, **kw)


def run_often_options() -> dict | None:
    """The compiler options :func:`jit_run_often` adds: ``{"xla_backend_optimization_level": 1}``
    where the process's ``XLA_FLAGS`` asks for a backend level below :data:`RUN_OFTEN_LEVEL`, else
    None (XLA's default level, or the level asked, stands)."""
    level = _asked_level()
    return None if level is None or level >= RUN_OFTEN_LEVEL else {"xla_backend_optimization_level": RUN_OFTEN_LEVEL}
