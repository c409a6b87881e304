"""Learning with the Vecchia likelihood, and the fitted model (:class:`VecchiaGP`).

Scaled Vecchia (Katzfuss, Guinness & Lawrence 2022): the ordering and the conditioning sets
are computed in u = x / l, and l is what learning changes. Learning therefore alternates:

    1. build the structure (ordering, neighbours, blocks) at the current length scales;
    2. maximize the Vecchia log likelihood at that fixed structure with L-BFGS-B
       (:func:`scalegp.inference.optimize.learn_hyperparameters`: kernel log-parameters and the log
       noise variance inside their box);
    3. if some learned length scale differs from the one the structure was built with by
       more than a factor ``rebuild_factor``, go back to 1 (at most ``max_structures``
       structures in all); otherwise stop.

The likelihood of each stage is a valid Vecchia approximation for every theta (the
structure only selects conditioning sets), so each stage's optimum is a proper maximum of
that approximation; the last stage's structure fits the learned scaling within the factor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .._validation import check_matrix, check_positive_int, check_vector
from ..engine.hyperparameters import Hyperparameters
from ..kernels import Kernel
from ..inference.optimize import learn_hyperparameters
from . import prediction
from .likelihood import VecchiaLikelihood, vecchia_log_likelihood
from .ordering import ORDERINGS
from .structure import VecchiaStructure, build_structure

#: Default neighbours per point (GpGp's default is 30).
DEFAULT_M = 30


@dataclass
class VecchiaGP:
    """A GP fitted with the Vecchia approximation.

    Parameters
    ----------
    kernel : Kernel
        Start (or fixed) kernel; its bounds are the box of learning.
    noise_variance : float
        Start (or fixed) noise variance s2 of y ~ N(0, K + s2 I).
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
    max_structures: int = 3
    rebuild_factor: float = 2.0
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
        if self.ordering not in ORDERINGS:
            raise ValueError(f"ordering must be one of {ORDERINGS}, got {self.ordering!r}")
        self.hyperparameters = Hyperparameters(self.kernel, self.noise_variance,
                                               self.noise_variance_bounds)

    # ----------------------------------------------------------------- fitting
    def _structure(self, length_scale) -> VecchiaStructure:
        return build_structure(self.X_train_, length_scale, self.m, ordering=self.ordering,
                               grouping=self.grouping, rng=self.random_state)

    def fit(self, X, y, *, learn: bool = True) -> VecchiaGP:
        """Learn the hyperparameters on (X, y) (module docstring), or keep them
        (``learn=False``), and keep the data for prediction. y is taken as centred."""
        self.X_train_ = check_matrix(X, "X")
        self.y_train_ = check_vector(y, "y", n_samples=self.X_train_.shape[0])
        self.kernel.check_n_dims(self.X_train_.shape[1])
        hyperparameters = self.hyperparameters
        self.history = []
        self._structure_ = None
        if not learn:              # prediction needs no structure: built on first use
            self.hyperparameters_ = hyperparameters
            return self
        structure = self._structure(hyperparameters.kernel.length_scale)
        for stage in range(self.max_structures):
            objective = VecchiaLikelihood(hyperparameters, self.X_train_, self.y_train_,
                                          structure, n_jobs=self.n_jobs)
            hyperparameters, result = learn_hyperparameters(
                objective, hyperparameters, n_restarts=self.n_restarts, rng=self.random_state)
            built = np.broadcast_to(structure.length_scale, (self.X_train_.shape[1],))
            learned = np.broadcast_to(hyperparameters.kernel.length_scale, built.shape)
            change = float(np.max(np.abs(np.log(learned / built))))
            self.history.append({"stage": stage, "log_likelihood": result.log_marginal_likelihood,
                                 "n_evaluations": result.n_evaluations,
                                 "converged": result.converged,
                                 "structure_length_scale": built.tolist(),
                                 "length_scale": learned.tolist(),
                                 "max_length_scale_factor": math.exp(change)})
            if change <= math.log(self.rebuild_factor) or stage + 1 == self.max_structures:
                break
            structure = self._structure(hyperparameters.kernel.length_scale)
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
                                      eval_gradient=eval_gradient, n_jobs=self.n_jobs)

    # ----------------------------------------------------------------- prediction
    @property
    def _m_predict(self) -> int:
        return self.m if self.m_predict is None else self.m_predict

    def predict(self, X, *, return_var: bool = False, include_noise: bool = False):
        """Independent Vecchia predictive mean (and variance) at X
        (:func:`scalegp.vecchia.prediction.predict`)."""
        return prediction.predict(self.kernel_, self.noise_variance_, self.X_train_,
                                  self.y_train_, X, self._m_predict, return_var=return_var,
                                  include_noise=include_noise, n_jobs=self.n_jobs)

    def predict_joint(self, X):
        """(mean, F) of the joint latent predictive at X, covariance F F^T."""
        return prediction.predict_joint(self.kernel_, self.noise_variance_, self.X_train_,
                                        self.y_train_, X, self._m_predict)

    def sample(self, X, n_samples: int, rng=None, *, include_noise: bool = False):
        """Joint draws at X, shape (len(X), n_samples)."""
        return prediction.sample(self.kernel_, self.noise_variance_, self.X_train_,
                                 self.y_train_, X, self._m_predict, n_samples, rng,
                                 include_noise=include_noise)


def fit_vecchia(X, y, kernel: Kernel, noise_variance: float = 1e-2, m: int = DEFAULT_M,
                **options) -> VecchiaGP:
    """Learn a Vecchia GP on (X, y) (y centred by the caller); ``options`` are
    :class:`VecchiaGP`'s. The result holds ``kernel_``, ``noise_variance_``, ``history``
    and predicts."""
    return VecchiaGP(kernel, noise_variance, m, **options).fit(X, y)
