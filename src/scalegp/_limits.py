"""Documented limits of the counts a user gives, checked before any work.

Every count has a bound, checked before the first pass (issue 24: ``--n-restarts 100000000``
ran over a minute drawing its starts before anything was said; ``--theta1-grid 0.1 10 1e9``
exhausted memory in ``linspace``). Counts whose cost is memory are checked against the
machine (:mod:`scalegp._memory`): ``n_components`` (``check_memory``), the predictive
covariance and the draws of ``sample_y`` (``check_prediction_memory``), a local model's
neighbourhoods and centres (:func:`scalegp.local.neighborhoods.check_memory`,
:func:`scalegp.local.centered` memory checks), the Gibbs sampler's m x m factors per grid point and
its kept draws (:mod:`scalegp.inference.gibbs`), the subsample of
``sample_kernel_approximation_error``. Counts whose cost is time, and whose useful range is far
below any machine's, get a fixed limit here, stated in the docstrings and ``--help``:

========================  ==================  ==============================================
count                     limit               why
========================  ==================  ==============================================
``n_restarts``            1,000               each restart is a whole L-BFGS-B run (tens to
                                              hundreds of likelihood passes over the data)
Gibbs ``theta1_grid``     10,000 atoms        one feature map and one m x m factor per atom,
                                              built before the first sweep (the paper: 100)
Gibbs ``n_iter``          10,000,000 sweeps   each sweep is O(m^3) at least (the paper:
                                              10,000)
``learn_knots``           10,000 iterations   each is a likelihood-and-gradient pass
========================  ==================  ==============================================
"""

from __future__ import annotations

#: Extra optimizer starts (``n_restarts``, ``--n-restarts``).
MAX_RESTARTS = 1_000
#: Atoms of the Gibbs sampler's theta1 grid (``theta1_grid``, ``--theta1-grid``'s COUNT).
MAX_THETA1_ATOMS = 10_000
#: Gibbs sweeps (``n_iter``, ``--n-iter``).
MAX_GIBBS_SWEEPS = 10_000_000
#: L-BFGS-B iterations of Nystrom knot learning (``learn_knots``).
MAX_KNOT_ITERATIONS = 10_000


def check_count(value: int, name: str, limit: int, why: str) -> int:
    """``value`` if it is at most ``limit``, else a ValueError naming the count, the limit
    and ``why`` it is bounded."""
    if value > limit:
        raise ValueError(f"{name}={value} is above its limit of {limit:,} ({why})")
    return value
