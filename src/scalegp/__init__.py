"""scalegp: Gaussian process regression at scale through low-rank kernel approximations."""

from . import (data, datasets, engine, estimators, features, inference, io, kernels, linalg, local,
               metrics, vecchia)
from ._version import __version__
from .engine.exact import ExactMarginalLikelihood, ExactPosterior
from .engine.likelihood import MarginalLikelihood, Posterior
from .engine.statistics import BasisStatistics, Statistics
from .errors import (ApproximationWarning, BoundaryWarning, ConvergenceWarning, FitQualityWarning,
                     InvalidModelFileError, NonFiniteResultError, NotPositiveDefiniteError,
                     NumericalWarning, UnsafeOutputError)
from .estimators.configuration import (Clusters, Exact, Features, Neighbors, Nystrom,
                                       TestPoints, Vecchia)
from .estimators.exact import ExactGPRegressor
from .estimators.gibbs import GibbsGPRegressor
from .estimators.gp_regressor import GPRegressor
from .estimators.lowrank import LowRankGPRegressor
from .estimators.transformers import FeatureMapTransformer
from .estimators.vecchia import VecchiaGPRegressor
from .inference.optimize import learn_hyperparameters
from .io import load, save
from .kernels import Cauchy, Gaussian, Kernel, Laplacian, Matern

__all__ = [
    "ApproximationWarning", "BasisStatistics", "BoundaryWarning", "Cauchy", "Clusters",
    "ConvergenceWarning", "Exact", "Features", "Neighbors", "Nystrom", "TestPoints", "Vecchia",
    "ExactGPRegressor", "ExactMarginalLikelihood", "ExactPosterior", "FeatureMapTransformer",
    "FitQualityWarning", "GPRegressor", "Gaussian", "GibbsGPRegressor", "InvalidModelFileError", "Kernel",
    "Laplacian", "LowRankGPRegressor", "MarginalLikelihood", "Matern", "NonFiniteResultError",
    "NotPositiveDefiniteError", "NumericalWarning", "Posterior", "Statistics",
    "UnsafeOutputError", "VecchiaGPRegressor", "__version__", "learn_hyperparameters", "load", "save",
    # the wings (docs/extending.md, "The layout of the package")
    "data", "datasets", "engine", "estimators", "features", "inference", "io", "kernels",
    "linalg", "local", "metrics", "vecchia",
]
