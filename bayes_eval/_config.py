"""Process-wide numerical configuration.

Importance weights reach 1e4-1e6 on imbalanced pools (``docs/architecture.md``, "Precision"), so
the package runs JAX in 64-bit mode.  This module is imported first by ``bayes_eval``.
"""
import jax

jax.config.update("jax_enable_x64", True)
