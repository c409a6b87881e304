"""scalegp: Gaussian process regression at scale through low-rank kernel approximations."""

from . import (clustering, exact, features, gibbs, gp, kernels, linalg, local, metrics,
               optimize)
from .errors import (ApproximationWarning, BoundaryWarning, ConvergenceWarning, FitQualityWarning,
                     InvalidModelFileError, NonFiniteResultError, NotPositiveDefiniteError,
                     NumericalWarning, UnsafeOutputError)
from .exact import ExactMarginalLikelihood, ExactPosterior
from .gp import BasisStatistics, MarginalLikelihood, Posterior, Statistics
from .kernels import Cauchy, Gaussian, Kernel, Laplacian, Matern
from .optimize import learn_hyperparameters
from .estimator import ExactGPRegressor, LowRankGPRegressor
from .gibbs_estimator import GibbsGPRegressor
from .io import load, save
from .transformers import FeatureMapTransformer
from . import vecchia  # the Vecchia approximation (docs/vecchia.md)

__version__ = "0.1.0"

__all__ = [
    "ApproximationWarning", "BasisStatistics", "BoundaryWarning", "Cauchy", "ConvergenceWarning", "FitQualityWarning",
    "NonFiniteResultError", "ExactMarginalLikelihood", "ExactPosterior",
    "Gaussian", "InvalidModelFileError", "Kernel", "Laplacian", "MarginalLikelihood", "Matern",
    "NotPositiveDefiniteError", "NumericalWarning", "Posterior", "Statistics",
    "UnsafeOutputError", "__version__",
    "clustering", "exact", "features", "gibbs", "gp", "kernels", "learn_hyperparameters", "linalg",
    "local", "metrics",
    "optimize",
    "ExactGPRegressor", "FeatureMapTransformer", "GibbsGPRegressor", "LowRankGPRegressor", "load", "save",
]
