"""The ``n_nodes="auto"`` search of Gauss-Legendre features: node counts chosen by likelihood.

docs/gauss-legendre.md, section 7. A Gauss-Legendre rule (:mod:`scalegp.features.gauss_legendre`)
is deterministic given its node counts; ``n_nodes="auto"`` grows them until the log marginal
likelihood and the posterior mean settle. That is model selection, and it needs the engine
(:mod:`scalegp.engine`), which the feature maps may not import: the map's ``build`` receives
:func:`search_node_counts` as its ``node_search`` option, which the builder shared by the
estimators and :class:`scalegp.FeatureMapTransformer`
(:func:`scalegp.estimators.transformers._build_feature_map`) supplies.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np

from .. import engine
from .._memory import ENGINE_MATRICES
from .._validation import check_positive_int
from ..features.base import FixedBasisFeatureMap
from ..features.gauss_legendre import MAX_COMPONENTS
from ..kernels import Kernel

#: Growth factor of q_j per step of ``n_nodes="auto"`` (docs/gauss-legendre.md, section 7).
AUTO_GROWTH = 1.25
#: Rows of the subsample on which ``n_nodes="auto"`` compares likelihoods and predictions.
AUTO_SUBSAMPLE = 2000
#: Memory budget of the s x s float64 matrices of a fit with a derived ``n_nodes="auto"``
#: budget (:func:`auto_budget`) ...
AUTO_MEMORY_BYTES = 2**30
#: ... of which a fit holds this many at its peak (the engine's count for the normal
#: equations, :data:`scalegp._memory.ENGINE_MATRICES`).
AUTO_SQUARE_MATRICES = ENGINE_MATRICES["cholesky"]


def auto_budget(n_samples: int, n_dims: int) -> tuple[int, str]:
    """The largest s of ``n_nodes="auto"`` when ``n_components`` is None, and why.

    s = min(floor(n / sqrt(3)), floor(sqrt(AUTO_MEMORY_BYTES / (8 AUTO_SQUARE_MATRICES))),
    MAX_COMPONENTS), at least min(4^d, MAX_COMPONENTS) (the first rule auto tries).

    - Cost: a fit makes one pass Phi^T Phi (n s^2 flops) and then O(s^3) per
      likelihood-and-gradient step; the exact GP costs a Cholesky factorization, n^3 / 3
      flops, and more per step. At s = n / sqrt(3) the pass alone costs one exact
      factorization, and each step (about s^3 = n^3 / 5.2) approaches an exact step: a
      larger s makes the fit no cheaper than the exact GP.
    - Memory: AUTO_SQUARE_MATRICES s x s float64 matrices within AUTO_MEMORY_BYTES (1 GiB:
      s <= 4,729 for the engine's 6).

    Parameters
    ----------
    n_samples, n_dims : int
        n and d of the training inputs.

    Returns
    -------
    budget : int
    reason : str
        The rule with its numbers, for the map's ``selection`` and warnings.
    """
    n = check_positive_int(n_samples, "n_samples")
    d = check_positive_int(n_dims, "n_dims")
    cost = int(math.floor(n / math.sqrt(3.0)))
    memory = int(math.isqrt(AUTO_MEMORY_BYTES // (8 * AUTO_SQUARE_MATRICES)))
    smallest = min(4 ** min(d, 7), MAX_COMPONENTS)
    budget = max(min(cost, memory, MAX_COMPONENTS), smallest)
    reason = (f"derived budget s <= {budget} = max(min(n / sqrt(3) = {cost} (no cheaper than "
              f"the exact GP beyond), {memory} ({AUTO_SQUARE_MATRICES} s x s float64 matrices "
              f"in {AUTO_MEMORY_BYTES / 2**30:g} GiB), {MAX_COMPONENTS}), {smallest}) for "
              f"n = {n}")
    return budget, reason


def _budget_cap(n_components, n_samples: int, n_dims: int) -> tuple[int, str]:
    """(budget, description) of n_nodes="auto": the user's n_components, or auto_budget."""
    if n_components is None:
        return auto_budget(n_samples, n_dims)
    budget = check_positive_int(n_components, "n_components")
    return budget, f"budget n_components = {budget}"


def search_node_counts(rule_for_budget: Callable[[int], FixedBasisFeatureMap],
                       kernels: list[Kernel], X: np.ndarray, y: np.ndarray, n_components,
                       tolerance: float, noise_variance: float, rng: np.random.Generator,
                       theta_description: str) -> tuple[np.ndarray, str]:
    """Node counts of ``n_nodes="auto"`` and their description (docs/gauss-legendre.md, section 7).

    q grows by AUTO_GROWTH per dimension (``rule_for_budget(s)``: the map's rule with the
    budget of s columns split over the dimensions, Q by the resolution rule) until the log
    marginal likelihood per sample and the root-mean-square posterior mean at the samples
    (relative to std(y)) change by less than ``tolerance`` between two steps (the smaller of
    the two is returned), for every kernel of ``kernels``: the kernel's hyperparameters and
    its length scales at the two extremes of Theta (where the truncation, respectively the
    node count, is hardest; docs/gauss-legendre.md, section 4), all with noise variance
    ``noise_variance``. Compared on a subsample of at most AUTO_SUBSAMPLE rows drawn with
    ``rng``. The largest s tried is ``n_components``, or :func:`auto_budget` when it is None.
    ``theta_description`` (the box Theta) ends the returned description.
    """
    budget, budget_note = _budget_cap(n_components, *X.shape)
    if X.shape[0] > AUTO_SUBSAMPLE:
        rows = np.sort(rng.choice(X.shape[0], AUTO_SUBSAMPLE, replace=False))
        X, y = X[rows], y[rows]
    y_scale = float(np.std(y)) or 1.0
    target = min(budget, 4 ** X.shape[1])
    steps, change = [], (math.inf, math.inf)          # steps: (q, [(log p, mean) per kernel])
    while True:
        fmap = rule_for_budget(target)
        counts = fmap.n_nodes
        if not steps or not np.array_equal(counts, steps[-1][0]):
            steps.append((counts, _likelihoods_and_means(fmap, kernels, noise_variance, X, y)))
        if len(steps) > 1 and steps[-1][0] is counts:
            (_, current), (_, previous) = steps[-1], steps[-2]
            change = (max(abs(a - b) for (a, _), (b, _) in zip(current, previous)) / X.shape[0],
                      max(np.sqrt(np.mean((m - p) ** 2))
                          for (_, m), (_, p) in zip(current, previous)) / y_scale)
            if max(change) < tolerance:
                break
        if target >= budget:
            break
        target = min(budget, int(math.ceil(target * AUTO_GROWTH ** X.shape[1])))
    converged = max(change) < tolerance
    # converged: the smaller of the last two rules already agrees with the larger
    counts = steps[-2][0] if converged else steps[-1][0]
    if not converged:
        warnings.warn(
            f"n_nodes='auto' stopped at the {budget_note} (q = {counts.tolist()}) before the "
            f"likelihood and predictions settled (last change {change[0]:.2e} per sample, "
            f"{change[1]:.2e} of std(y); tolerance {tolerance:g}); raise n_components",
            UserWarning, stacklevel=3)
    selection = (f"auto, {'converged' if converged else 'stopped at the budget'}: last change "
                 f"{change[0]:.2e} in log p(y)/n, {change[1]:.2e} std(y) in the mean "
                 f"(tolerance {tolerance:g}, noise variance {noise_variance:.3g}); "
                 f"{budget_note}; {theta_description}")
    return counts, selection


def _likelihoods_and_means(fmap, kernels, noise_variance, X, y):
    """(log p(y), posterior mean at X) for each kernel, from one basis pass."""
    statistics = engine.BasisStatistics.accumulate(fmap, X, y)
    Phi = fmap.basis(X)
    out = []
    for kernel in kernels:
        value, system = engine.log_marginal_likelihood(statistics.at(fmap, kernel), noise_variance)
        out.append((value, Phi @ (np.sqrt(fmap.weights(kernel)) * system.beta)))
    return out
