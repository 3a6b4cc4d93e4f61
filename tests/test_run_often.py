"""``bayes_eval._config.jit_run_often``: the programs compiled once and run many times (the session's
posterior, the simulation's batch of posteriors) compile at XLA's backend level 1 where the process asks
for level 0 (the default test tier), and as the process asks otherwise (``docs/architecture.md``, "Where
the default test tier's time goes")."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_eval._config import RUN_OFTEN_LEVEL, jit_run_often, run_often_options


@pytest.mark.parametrize("flags, options", [
    ("", None),                                                           # XLA's default level
    ("--xla_backend_optimization_level=0", {"xla_backend_optimization_level": RUN_OFTEN_LEVEL}),
    ("--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true",
     {"xla_backend_optimization_level": RUN_OFTEN_LEVEL}),
    ("--xla_backend_optimization_level=2", None),                         # a level asked of 1 or more stands
    ("--xla_backend_optimization_level=0 --xla_backend_optimization_level=3", None),   # the last one given
    ("--xla_backend_optimization_level=x", None),
])
def test_the_options_follow_the_level_the_process_asks_for(monkeypatch, flags, options):
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert run_often_options() == options


def test_a_program_run_often_compiles_with_those_options_and_computes_the_same(monkeypatch):
    def f(x):
        return jnp.cumsum(jnp.sin(x) * jnp.exp(-x)) / (1.0 + x)

    x = jnp.linspace(0.0, 3.0, 257)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=0")
    fast = jit_run_often(f)
    # the options reach XLA: an option it does not know would fail here
    compiled = fast.lower(x).compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), np.asarray(jax.jit(f)(x)), rtol=0, atol=1e-15)
