"""Dense linear algebra for the oracle models' small matrices (the calibration curve's
(a, b, log κ, band and group offsets): 3 to ~20 parameters) in plain JAX operations.

Why not ``jnp.linalg``: on the CPU, jaxlib's batched LAPACK kernels (``lapack_dpotrf_ffi``,
``dgetrf``, ``dsyevd``, ``dtrsm``: every ``jnp.linalg`` / ``jax.scipy.linalg`` routine under
``vmap``) split their batch over XLA's intra-op thread pool and block a pool thread until the
pieces finish.  When XLA runs as many independent such calls at once as the pool has threads
(the pool is sized from the CPU affinity: two on a two-core machine), every thread waits on
work that no thread is left to run, and the program hangs in ``block_until_ready`` with no CPU
time.  Measured at stop 60 (jax / jaxlib 0.10.2, two cores): the default tier's SBC fixture
(``tests/test_posterior.py``, 220 vmapped posteriors with the band walk's scale on a grid,
``fit_mode_grid`` / ``sample_params_grid``) hung in 3 of 12 pytest runs and in 9 of 9 runs of
the same program compiled without the test's cache, every busy pool thread parked in
``jax::ParallelBatchMap`` under ``LuDecomposition`` / ``EigenvalueDecompositionSymmetric``
(``gdb``); with the routines below it ran 5 of 5.  (A public report says jaxlib 0.11.2 compiles
that parallel path out of open-source builds; pip resolves 0.10.2 here, so nothing relies on
it.)  The models vmap these routines over repeats and grid points, so they use the loops below
instead: a Cholesky factorisation and triangular solves as ``fori_loop`` over the matrix's
columns, Jacobi rotations for the eigenvalues — code XLA compiles itself (no custom call,
nothing that waits on the pool).  The price is the eigenvalues: the model's sampler ~11%
slower at XLA's default optimisation level, a Newton fit 2.3 × at the test tier's level 0
(:func:`eigvalsh`).

Conventions follow ``jnp.linalg``: a matrix that is not positive definite gives a factor
with non-finite entries (its failed pivot is √(negative) or 0), which callers check with
:func:`is_factor`.
"""
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["cholesky", "solve_lower", "solve_lower_transpose", "cho_solve", "spd_inverse",
           "logdet_of_factor", "is_factor", "eigvalsh"]


def cholesky(a):
    """The lower-triangular L with L Lᵀ = a (a symmetric positive definite, (n, n)):
    column by column, L[:, j] = (a[:, j] − L L[j, :]ᵀ) / L[j, j] below the diagonal (the
    columns ≥ j of L still zero, so the product sums over k < j only)."""
    n = a.shape[-1]
    rows = jnp.arange(n)

    def column(j, factor):
        v = a[:, j] - factor @ factor[j, :]
        d = jnp.sqrt(v[j])
        return factor.at[:, j].set(jnp.where(rows > j, v / d, jnp.where(rows == j, d, 0.0)))

    return jax.lax.fori_loop(0, n, column, jnp.zeros_like(a))


def solve_lower(factor, b):
    """x with L x = b, L lower triangular (n, n), b (n,) or (n, k): forward substitution."""
    n = factor.shape[-1]

    def row(i, x):   # x's rows ≥ i are still zero
        return x.at[i].set((b[i] - factor[i, :] @ x) / factor[i, i])

    return jax.lax.fori_loop(0, n, row, jnp.zeros_like(b))


def solve_lower_transpose(factor, b):
    """x with Lᵀ x = b, L lower triangular: back substitution."""
    n = factor.shape[-1]

    def row(k, x):   # i = n − 1 − k; x's rows ≤ i are still zero
        i = n - 1 - k
        return x.at[i].set((b[i] - factor[:, i] @ x) / factor[i, i])

    return jax.lax.fori_loop(0, n, row, jnp.zeros_like(b))


def cho_solve(factor, b):
    """x with (L Lᵀ) x = b."""
    return solve_lower_transpose(factor, solve_lower(factor, b))


def spd_inverse(a):
    """a⁻¹ for a symmetric positive definite a, through its Cholesky factor (symmetrised)."""
    inv = cho_solve(cholesky(a), jnp.eye(a.shape[-1], dtype=a.dtype))
    return 0.5 * (inv + inv.T)


def logdet_of_factor(factor):
    """log det(L Lᵀ) = 2 Σ log L_ii."""
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(factor)))


def is_factor(factor):
    """Whether :func:`cholesky` succeeded: every entry finite and every pivot > 0 (the
    matrix was positive definite to working precision)."""
    return jnp.all(jnp.isfinite(factor)) & jnp.all(jnp.diagonal(factor) > 0)


def _round_robin(n: int):
    """The rounds of a round-robin tournament of n players (n even): n − 1 rounds, each pairing
    every player once (the circle method: player 0 fixed, the others turned one seat a round)."""
    seats = list(range(1, n))
    rounds = []
    for _ in range(n - 1):
        order = [0] + seats
        rounds.append([(min(order[i], order[n - 1 - i]), max(order[i], order[n - 1 - i])) for i in range(n // 2)])
        seats = seats[-1:] + seats[:-1]
    return np.array(rounds)                     # (n − 1, n / 2, 2)


def eigvalsh(a, sweeps: int | None = None):
    """The eigenvalues of a symmetric a (n, n), ascending: the Jacobi method in parallel
    (round-robin) order — each step rotates ⌊n/2⌋ disjoint pairs (p, q) at once, each rotation
    zeroing a_pq, as one orthogonal J (a ← Jᵀ a J); a sweep is n − 1 steps (n + 1 even) and
    visits every pair once.  Convergence is quadratic near the end; ``sweeps`` (default
    6 + ⌈log₂ n⌉: 8 for n = 3, 10 for n = 9, 11 for n = 19) reach round-off on the models'
    matrices: ~ε‖a‖ as LAPACK's, checked against ``numpy.linalg.eigvalsh`` on badly scaled and
    indefinite matrices in tests/test_small_linalg.py.  A fixed count rather than a convergence
    test: under vmap it ran faster.  Cost (200 vmapped fits of the nine-parameter curve, 25 Newton
    steps, XLA at the test tier's optimisation level 0): 0.75 s against 0.32 s with LAPACK's
    ``syevd``; at the default level the whole sampler is ~11% slower than with LAPACK."""
    n = a.shape[-1]
    if n == 1:
        return a[..., 0, :]
    sweeps = 6 + int(np.ceil(np.log2(n))) if sweeps is None else int(sweeps)
    size = n + n % 2                            # an odd n gains a decoupled zero row and column
    m0 = jnp.zeros((size, size), a.dtype).at[:n, :n].set(0.5 * (a + a.T))
    rounds = jnp.asarray(_round_robin(size))
    eye = jnp.eye(size, dtype=a.dtype)

    def step(i, m):
        p, q = rounds[i % (size - 1), :, 0], rounds[i % (size - 1), :, 1]
        apq, app, aqq = m[p, q], m[p, p], m[q, q]
        small = apq == 0
        theta = (aqq - app) / (2.0 * jnp.where(small, 1.0, apq))
        t = jnp.where(small, 0.0, jnp.sign(theta + (theta == 0)) / (jnp.abs(theta) + jnp.sqrt(theta * theta + 1.0)))
        c = 1.0 / jnp.sqrt(t * t + 1.0)
        s = t * c
        rot = eye.at[p, p].set(c).at[q, q].set(c).at[p, q].set(s).at[q, p].set(-s)
        return rot.T @ m @ rot

    m = jax.lax.fori_loop(0, sweeps * (size - 1), step, m0)
    return jnp.sort(jnp.diagonal(m)[:n])
