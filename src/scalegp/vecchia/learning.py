"""Learning with the Vecchia likelihood, and the fitted model (:class:`VecchiaGP`).

Scaled Vecchia (Katzfuss, Guinness & Lawrence 2022): the ordering and the conditioning sets
are computed in u = x / l, and l is what learning changes. They depend on l only up to a
common factor (every ordering and the neighbour search compare distances only, and the
coordinate ordering sums coordinates), so what matters is the *shape* of l: the factors
f_j = l_j / l_built_j divided by their geometric mean. Learning therefore runs:

    1. build the structure (ordering, neighbours, blocks) at the current length scales;
    2. for each size n_k of ``schedule`` (member points; None: all), maximize by L-BFGS-B
       (:func:`scalegp.inference.optimize.learn_hyperparameters`) the sum of the Vecchia
       terms of the shortest prefix of a random permutation of the blocks that holds at
       least n_k members, starting from the previous stage's optimum;
    3. if the learned shape differs from the one the structure was built with by more than
       a factor ``rebuild_factor`` (max_j |log f_j - mean log f|), rebuild at the learned
       scales and repeat the stage (at most ``max_structures`` structures in all).

A sample of the blocks keeps the density of the data (a random subsample of the points
would not: it learns longer length scales), so its optimum estimates the full one, and
each evaluation costs its share of the blocks: a schedule (2000, 8000, None) takes most
L-BFGS-B steps at a few per cent of the full cost and finishes with a few full ones. The
samples are nested (prefixes of one permutation). Each stage's objective is a valid
Vecchia approximation (of the sampled members' conditionals) for every theta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .._validation import (as_generator, check_matrix, check_noise_variances, check_positive_int,
                           check_vector)
from ..engine.hyperparameters import Hyperparameters
from ..kernels import Kernel
from ..inference.optimize import learn_hyperparameters
from . import prediction
from .fisher import fisher_scoring
from .likelihood import VecchiaLikelihood, vecchia_log_likelihood
from .ordering import ORDERINGS
from .structure import VecchiaStructure, build_structure

#: Default neighbours per point (GpGp's default is 30).
DEFAULT_M = 30
#: Learning's optimizers (:class:`VecchiaGP`'s ``optimizer``).
OPTIMIZERS = ("lbfgs", "fisher")
#: Structures per fit at most (scaled Vecchia's rebuilds).
MAX_STRUCTURES = 3
#: The change of the length scales' shape (:func:`shape_change`) that rebuilds a structure.
REBUILD_FACTOR = 2.0


def shape_change(built, learned) -> float:
    """How far the shape of the length scales moved from those a structure was built at:
    exp(max_j |log f_j - mean log f|) with f = learned / built (1 for a common factor, which
    changes no ordering or neighbour set). Learning rebuilds the structure when it exceeds
    ``REBUILD_FACTOR``."""
    built = np.asarray(built, dtype=float).ravel()
    learned = np.asarray(learned, dtype=float).ravel()
    size = max(built.size, learned.size)
    log_factor = np.log(np.broadcast_to(learned, (size,)) / np.broadcast_to(built, (size,)))
    return math.exp(float(np.max(np.abs(log_factor - log_factor.mean()))))


@dataclass
class VecchiaGP:
    """A GP fitted with the Vecchia approximation.

    Parameters
    ----------
    kernel : Kernel
        Start (or fixed) kernel; its bounds are the box of learning.
    noise_variance : float
        Start (or fixed) noise variance s2 of y ~ N(0, K + s2 I + V) (V: the known noise
        variances ``fit`` may take, else 0).
    m : int
        Conditioning-set size of the likelihood (neighbours per training point).
    m_predict : int, optional
        Training neighbours per test point (default ``m``).
    noise_variance_bounds : (float, float) or "fixed"
    ordering : "maximin", "random" or "coordinate"
    grouping : bool
        Guinness's grouped blocks (True) or one block per point.
    max_structures, rebuild_factor : int, float
        Scaled Vecchia's rebuilds during learning (module docstring).
    schedule : tuple of (int or None)
        Member points of the blocks each learning stage samples (None: all blocks); the
        default (None,) learns on the whole likelihood at once.
    optimizer : "lbfgs" or "fisher"
        L-BFGS-B (:func:`scalegp.inference.optimize.learn_hyperparameters`) or Fisher
        scoring (:func:`scalegp.vecchia.fisher.fisher_scoring`, as GpGp), which needs a few
        evaluations from a start near the optimum.
    tolerance : float or None
        With "fisher": stop when the step's predicted gain is below ``tolerance`` nats
        (None: GpGp's 1e-4). With "lbfgs": stop a stage when an L-BFGS-B iteration raises the log likelihood of its n sampled
        conditionals by less than ``tolerance`` / n of its size (L-BFGS-B's ``ftol``): about
        ``tolerance`` times the log likelihood per point, in nats. None: scipy's ftol
        (2.2e-9, about 3e-4 nats on the 77,800-point relief map, where the learned
        hyperparameters stop moving long before).
    n_restarts : int
        Extra L-BFGS-B starts per stage (:func:`scalegp.inference.optimize.maximize_likelihood`).
    n_jobs : int
        Threads over blocks and test points.
    random_state : None, int or Generator
        For the random ordering and restarts.
    """

    kernel: Kernel
    noise_variance: float = 1e-2
    m: int = DEFAULT_M
    m_predict: int | None = None
    noise_variance_bounds: object = (1e-6, 1e5)
    ordering: str = "maximin"
    grouping: bool = True
    max_structures: int = MAX_STRUCTURES
    rebuild_factor: float = REBUILD_FACTOR
    schedule: tuple = (None,)
    optimizer: str = "lbfgs"
    tolerance: float | None = None
    n_restarts: int = 0
    n_jobs: int = 1
    random_state: object = None
    history: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.kernel, Kernel):
            raise TypeError(f"kernel must be a Kernel, got {type(self.kernel).__name__}")
        self.m = check_positive_int(self.m, "m")
        if self.m_predict is not None:
            self.m_predict = check_positive_int(self.m_predict, "m_predict")
        self.max_structures = check_positive_int(self.max_structures, "max_structures")
        if not (isinstance(self.rebuild_factor, (int, float)) and self.rebuild_factor > 1.0):
            raise ValueError(f"rebuild_factor must be a number > 1, got {self.rebuild_factor!r}")
        self.n_jobs = check_positive_int(self.n_jobs, "n_jobs")
        self.tolerance = check_tolerance(self.tolerance, "tolerance")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        self.schedule = check_schedule(self.schedule, "schedule")
        if self.ordering not in ORDERINGS:
            raise ValueError(f"ordering must be one of {ORDERINGS}, got {self.ordering!r}")
        self.hyperparameters = Hyperparameters(self.kernel, self.noise_variance,
                                               self.noise_variance_bounds)

    # ----------------------------------------------------------------- fitting
    def _structure(self, length_scale) -> VecchiaStructure:
        return build_structure(self.X_train_, length_scale, self.m, ordering=self.ordering,
                               grouping=self.grouping, rng=self.random_state,
                               n_jobs=self.n_jobs)

    def fit(self, X, y, *, learn: bool = True, sample_noise_variance=None) -> VecchiaGP:
        """Learn the hyperparameters on (X, y) (module docstring), or keep them
        (``learn=False``), and keep the data for prediction. y is taken as centred;
        ``sample_noise_variance``: known per-row noise variances V (>= 0) added to s2."""
        self.X_train_ = check_matrix(X, "X")
        self.y_train_ = check_vector(y, "y", n_samples=self.X_train_.shape[0])
        self.sample_noise_variance_ = None if sample_noise_variance is None else \
            check_noise_variances(sample_noise_variance, self.X_train_.shape[0])
        self.kernel.check_n_dims(self.X_train_.shape[1])
        hyperparameters = self.hyperparameters
        self.history = []
        self._structure_ = None
        if not learn:              # prediction needs no structure: built on first use
            self.hyperparameters_ = hyperparameters
            return self
        structure = self._structure(hyperparameters.kernel.length_scale)
        n_structures, stage = 1, 0
        generator = as_generator(self.random_state)
        schedule = stage_sizes(self.schedule, len(self.y_train_))
        permutation = generator.permutation(structure.blocks.n_blocks)
        while stage < len(schedule):
            sample = sample_blocks(structure, schedule[stage], permutation)
            objective = VecchiaLikelihood(hyperparameters, self.X_train_, self.y_train_,
                                          sample, n_jobs=self.n_jobs,
                                          sample_noise_variance=self.sample_noise_variance_)
            if self.optimizer == "fisher":
                hyperparameters, result = fisher_scoring(objective, hyperparameters,
                                                         tolerance=self.tolerance)
            else:
                hyperparameters, result = learn_hyperparameters(
                    objective, hyperparameters, n_restarts=self.n_restarts, rng=generator,
                    ftol=stage_ftol(self.tolerance, sample))
            record = stage_record(stage, sample, structure, hyperparameters, result)
            self.history.append(record)
            if record["shape_factor"] > self.rebuild_factor and \
                    n_structures < self.max_structures:
                structure = self._structure(hyperparameters.kernel.length_scale)
                permutation = generator.permutation(structure.blocks.n_blocks)
                n_structures += 1
                continue                                   # the stage again, rebuilt
            stage += 1
        self.hyperparameters_ = hyperparameters
        self._structure_ = structure
        return self

    @property
    def structure_(self) -> VecchiaStructure:
        """The structure of the last learning stage (with ``learn=False``: one built at the
        kernel's length scales on first use)."""
        if self._structure_ is None:
            self._structure_ = self._structure(self.kernel_.length_scale)
        return self._structure_

    @property
    def kernel_(self) -> Kernel:
        return self.hyperparameters_.kernel

    @property
    def noise_variance_(self) -> float:
        return self.hyperparameters_.noise_variance

    def log_likelihood(self, *, eval_gradient: bool = False):
        """The Vecchia log likelihood of the training data at the fitted hyperparameters."""
        return vecchia_log_likelihood(self.kernel_, self.noise_variance_, self.X_train_,
                                      self.y_train_, self.structure_,
                                      eval_gradient=eval_gradient, n_jobs=self.n_jobs,
                                      sample_noise_variance=self.sample_noise_variance_)

    # ----------------------------------------------------------------- prediction
    @property
    def _m_predict(self) -> int:
        return self.m if self.m_predict is None else self.m_predict

    def predict(self, X, *, return_var: bool = False, include_noise: bool = False):
        """Independent Vecchia predictive mean (and variance) at X
        (:func:`scalegp.vecchia.prediction.predict`)."""
        return prediction.predict(self.kernel_, self.noise_variance_, self.X_train_,
                                  self.y_train_, X, self._m_predict, return_var=return_var,
                                  include_noise=include_noise, n_jobs=self.n_jobs,
                                  sample_noise_variance=self.sample_noise_variance_)

    def predict_joint(self, X):
        """(mean, F) of the joint latent predictive at X, covariance F F^T."""
        return prediction.predict_joint(self.kernel_, self.noise_variance_, self.X_train_,
                                        self.y_train_, X, self._m_predict,
                                        sample_noise_variance=self.sample_noise_variance_)

    def sample(self, X, n_samples: int, rng=None, *, include_noise: bool = False):
        """Joint draws at X, shape (len(X), n_samples)."""
        return prediction.sample(self.kernel_, self.noise_variance_, self.X_train_,
                                 self.y_train_, X, self._m_predict, n_samples, rng,
                                 include_noise=include_noise,
                                 sample_noise_variance=self.sample_noise_variance_)


def sample_blocks(structure: VecchiaStructure, n_points, permutation) -> VecchiaStructure:
    """The structure with the shortest prefix of ``permutation`` (of its blocks) that holds
    at least ``n_points`` members (None or at least N: the structure itself). One
    permutation per structure: the stages' samples are nested."""
    blocks = structure.blocks
    if n_points is None or n_points >= structure.n_samples:
        return structure
    counts = np.add.reduceat(blocks.is_member, blocks.set_ptr[:-1], dtype=np.intp)  # no
    # integer copy of the member mask (9.3 million points, m = 30: 2.3 GB in intp)
    taken = int(np.searchsorted(np.cumsum(counts[permutation]), n_points)) + 1
    return replace(structure, blocks=blocks.subset(permutation[:taken]))


def check_schedule(schedule, name: str) -> tuple:
    """A learning schedule: a non-empty sequence of positive ints or None (all blocks)."""
    try:
        schedule = tuple(schedule)
    except TypeError:
        raise ValueError(f"{name} must be a non-empty sequence of positive ints or None, "
                         f"got {schedule!r}") from None
    if not schedule or not all(
            size is None or (isinstance(size, (int, np.integer)) and not isinstance(size, bool)
                             and size >= 1)
            for size in schedule):
        raise ValueError(f"{name} must be a non-empty sequence of positive ints or None (the "
                         f"whole likelihood), got {schedule!r}")
    return schedule


def check_tolerance(tolerance, name: str):
    """A stage tolerance: None or a finite number > 0."""
    if tolerance is None:
        return None
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float, np.floating)) \
            or not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"{name} must be None or a finite number > 0, got {tolerance!r}")
    return float(tolerance)


def stage_sizes(schedule: tuple, n_samples: int) -> list:
    """The stages a schedule runs on N points: sizes of N or more become None (the whole
    likelihood), and a size equal to the one before is dropped (it would learn again on the
    same sample)."""
    sizes = []
    for size in schedule:
        size = None if size is None or size >= n_samples else int(size)
        if not sizes or size != sizes[-1]:
            sizes.append(size)
    return sizes


def stage_ftol(tolerance, sample: VecchiaStructure):
    """L-BFGS-B's ``ftol`` for a stage on ``sample``: ``tolerance`` / n (n its sampled
    members; None: scipy's default), so that a stage stops when an iteration gains less
    than about ``tolerance`` times the log likelihood per point (:class:`VecchiaGP`)."""
    return None if tolerance is None else tolerance / max(sample.blocks.n_members, 1)


def stage_record(stage: int, sample: VecchiaStructure, structure: VecchiaStructure,
                 hyperparameters: Hyperparameters, result) -> dict:
    """What one learning stage did (an entry of ``VecchiaGP.history``): its sampled points,
    log likelihood, evaluations, convergence, and how far the learned length scales moved
    from those its structure was built at (``shape_factor``: :func:`shape_change`)."""
    built = structure.length_scale
    learned = np.broadcast_to(hyperparameters.kernel.length_scale, built.shape)
    log_factor = np.log(learned / built)
    return {"stage": stage, "n_points": int(sample.blocks.n_members),
            "log_likelihood": float(result.log_marginal_likelihood),
            "n_evaluations": int(result.n_evaluations), "converged": bool(result.converged),
            "structure_length_scale": built.tolist(), "length_scale": learned.tolist(),
            "max_length_scale_factor": math.exp(float(np.max(np.abs(log_factor)))),
            "shape_factor": shape_change(built, learned)}


def fit_vecchia(X, y, kernel: Kernel, noise_variance: float = 1e-2, m: int = DEFAULT_M,
                **options) -> VecchiaGP:
    """Learn a Vecchia GP on (X, y) (y centred by the caller); ``options`` are
    :class:`VecchiaGP`'s. The result holds ``kernel_``, ``noise_variance_``, ``history``
    and predicts."""
    return VecchiaGP(kernel, noise_variance, m, **options).fit(X, y)
