"""The factorized m x m system of the low-rank engine: M = s2 S + G with beta = M^{-1} b.

Three kinds share one interface (docs/engine.md, "Posterior"): :class:`CholeskySystem` (S = I),
:class:`EigenSystem` (signed features, kept as they are) and :class:`RepairedSystem` (the
positive part of a signed approximation, docs/positive-part.md). Each declares, writes and
reads its own model-file arrays (``STORED``, :meth:`FactorizedSystem.to_state`,
:meth:`FactorizedSystem.from_state`; :mod:`scalegp.stored`), so the model-file code needs no
branch on the kind.
"""

from __future__ import annotations

import abc
import functools
import math
from typing import ClassVar

import numpy as np

from .. import linalg
from ..errors import NotPositiveDefiniteError
from ..stored import Array
from .positive_part import PositivePart

__all__ = ["FactorizedSystem", "CholeskySystem", "EigenSystem", "RepairedSystem", "SYSTEMS",
           "POSITIVE_PART_PREFIX"]


#: Model-file prefix of a repaired system's arrays.
POSITIVE_PART_PREFIX = "positive_part."


class FactorizedSystem(abc.ABC):
    """M = s2 S + G factorized, with beta = M^{-1} b: one of three kinds.

    * :class:`CholeskySystem` (S = I): M = L L^T, with adaptive jitter recorded in ``jitter``;
    * :class:`EigenSystem` (signed features): a symmetric eigen-factorization; K = Psi S Psi^T +
      s2 I is positive definite exactly when M has as many negative eigenvalues as S has -1
      entries (Sylvester's law of inertia applied to [[s2 I, Psi], [Psi^T, -S]];
      docs/engine.md, "Signed systems");
    * :class:`RepairedSystem`: the Cholesky system of the positive part of a signed
      approximation, written in the repaired features Psi+ = Psi T (:meth:`project`).

    Each kind declares its arrays for a model file (``STORED``: the system has dimension m,
    r <= m for the repaired one) and writes and reads them
    (:meth:`to_state`, :meth:`from_state`), so the model file code needs no branch on the kind.
    """

    #: The ``system.factorization`` entry of a model file.
    name: ClassVar[str]
    #: Whether the kind is the factorization of a signed map's system.
    signed: ClassVar[bool] = False
    STORED = {"beta": Array(("m",))}

    def __init__(self, noise_variance: float, beta: np.ndarray, jitter: float = 0.0):
        self.noise_variance = float(noise_variance)
        self.beta = beta
        self.jitter = float(jitter)

    @staticmethod
    def factor(statistics, noise_variance: float,
               signs: np.ndarray | None = None) -> "FactorizedSystem":
        """The Cholesky system for S = I (signs None), the eigen system otherwise."""
        if signs is None:
            return CholeskySystem.factor(statistics, noise_variance)
        return EigenSystem.factor(statistics, noise_variance, signs)

    @classmethod
    def factor_positive_part(cls, statistics, noise_variance: float,
                             signs: np.ndarray) -> tuple["RepairedSystem", object]:
        """The Cholesky system of the positive part of Psi S Psi^T, and the statistics of the
        repaired features: G+ = diag(lambda_+), b+ = T^T b (:mod:`scalegp.engine.positive_part`)."""
        part = PositivePart.of(statistics.gram, statistics.projection, signs)
        repaired = type(statistics)(np.diag(part.eigenvalues[part.eigenvalues > 0]),
                                    part.transform.T @ statistics.projection,
                                    statistics.y_norm2, statistics.n_samples)
        system = CholeskySystem.factor(repaired, noise_variance)
        return RepairedSystem(noise_variance, system.beta, system.jitter,
                              system.cholesky_factor, part), repaired

    @property
    def n_components(self) -> int:
        return self.beta.shape[0]

    @property
    def signs(self) -> np.ndarray | None:
        """S of the system's features, or None for S = I."""
        return None

    @property
    def positive_part(self) -> PositivePart | None:
        """The repair of a :class:`RepairedSystem`; None otherwise."""
        return None

    def signs_or_ones(self) -> np.ndarray:
        return np.ones(self.n_components) if self.signs is None else self.signs

    def project(self, Psi: np.ndarray) -> np.ndarray:
        """The features this system is written in: Psi, or Psi T for a repaired system."""
        return Psi

    @abc.abstractmethod
    def solve(self, B: np.ndarray) -> np.ndarray:
        """M^{-1} B."""

    @abc.abstractmethod
    def logabsdet(self) -> float:
        """log |det M|."""

    @functools.cached_property
    def inverse_diagonal(self) -> np.ndarray:
        """diag(M^{-1}), computed once per factorization (both gradients need it)."""
        return self._inverse_diagonal()

    @abc.abstractmethod
    def _inverse_diagonal(self) -> np.ndarray:
        ...

    @functools.cached_property
    def inverse(self) -> np.ndarray:
        """M^{-1}, once per factorization, for the gradient's trace term
        tr(M^{-1} Psi^T dPsi) = sum_rows (Psi M^{-1}) o dPsi (docs/engine.md, "Gradient")."""
        return self.solve(np.eye(self.n_components))

    @abc.abstractmethod
    def quadratic_diagonal(self, Psi: np.ndarray) -> np.ndarray:
        """diag(Psi M^{-1} Psi^T) row by row."""

    def sample_weights(self, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        """Draws of the weights w ~ N(beta, s2 M^{-1}), shape (m, n_samples), so that
        psi(x)^T w are draws of the latent posterior (docs/engine.md, "Posterior")."""
        raise NotImplementedError(
            f"the {self.name} system has no weight-space posterior (M^{{-1}} is indefinite)")

    def to_state(self) -> dict[str, np.ndarray]:
        """The system's arrays for a model file, as ``STORED`` declares them."""
        return {"beta": self.beta, **self._factor_arrays()}

    @abc.abstractmethod
    def _factor_arrays(self) -> dict[str, np.ndarray]:
        """The factorization's arrays (besides ``beta``)."""

    @classmethod
    @abc.abstractmethod
    def from_state(cls, state: dict, *, noise_variance: float, jitter: float,
                   signs: np.ndarray | None) -> "FactorizedSystem":
        """The system from its validated model-file arrays (those of :meth:`to_state`);
        ValueError where they disagree with each other or with the signs."""


class CholeskySystem(FactorizedSystem):
    """M = L L^T (S = I); latent variance s2 |L^{-1} psi|^2."""

    name = "cholesky"
    STORED = {"cholesky_factor": Array(("m", "m"), ("finite", "cholesky"))}

    def __init__(self, noise_variance, beta, jitter, cholesky_factor: np.ndarray):
        super().__init__(noise_variance, beta, jitter)
        self.cholesky_factor = cholesky_factor

    @classmethod
    def factor(cls, statistics, noise_variance: float) -> "CholeskySystem":
        m = statistics.gram.shape[0]
        L, jitter = linalg.cholesky(statistics.gram + noise_variance * np.eye(m),
                                    name="Psi^T Psi + noise_variance I")
        return cls(noise_variance, linalg.cho_solve(L, statistics.projection), jitter, L)

    def solve(self, B):
        return linalg.cho_solve(self.cholesky_factor, B)

    def logabsdet(self):
        return linalg.logdet_from_cholesky(self.cholesky_factor)

    def _inverse_diagonal(self):
        return linalg.inverse_diagonal_from_cholesky(self.cholesky_factor)

    @functools.cached_property
    def inverse(self):
        return linalg.inverse_from_cholesky(self.cholesky_factor)

    def quadratic_diagonal(self, Psi):
        V = linalg.solve_lower(self.cholesky_factor, Psi.T)
        return np.einsum("ij,ij->j", V, V)

    def sample_weights(self, n_samples, rng):
        # w = beta + sqrt(s2) L^{-T} z: Cov = s2 L^{-T} L^{-1} = s2 M^{-1}
        Z = rng.standard_normal((self.n_components, n_samples))
        return self.beta[:, None] + math.sqrt(self.noise_variance) * linalg.solve_lower(
            self.cholesky_factor, Z, transpose=True)

    def _factor_arrays(self):
        return {"cholesky_factor": self.cholesky_factor}

    @classmethod
    def from_state(cls, state, *, noise_variance, jitter, signs):
        return cls(noise_variance, state["beta"], jitter, state["cholesky_factor"])


class EigenSystem(FactorizedSystem):
    """M = V diag(lambda) V^T, symmetric indefinite (signed features)."""

    name = "eigen"
    signed = True
    STORED = {"eigenvalues": Array(("m",), ("finite", "nonsingular")),
              "eigenvectors": Array(("m", "m"))}

    def __init__(self, noise_variance, beta, jitter, signs: np.ndarray,
                 indefinite: linalg.SymmetricFactorization):
        super().__init__(noise_variance, beta, jitter)
        self._signs = signs
        self.indefinite = indefinite

    @classmethod
    def factor(cls, statistics, noise_variance: float,
               signs: np.ndarray) -> "EigenSystem":
        signs = np.asarray(signs, dtype=float)
        factorization = linalg.SymmetricFactorization.factor(
            statistics.gram + noise_variance * np.diag(signs),
            name="Psi^T Psi + noise_variance S")
        expected = int(np.sum(signs < 0))
        if factorization.n_negative != expected:
            raise NotPositiveDefiniteError(
                "the approximate covariance Psi S Psi^T + noise_variance I is not positive "
                f"definite (M has {factorization.n_negative} negative eigenvalues, "
                f"{expected} expected from the signs); the signed quadrature rule is too "
                "inaccurate here: increase n_components or noise_variance, or use its "
                "positive part (signed_rule='repair')"
            )
        return cls(noise_variance, factorization.solve(statistics.projection), 0.0, signs,
                   factorization)

    @property
    def signs(self):
        return self._signs

    def solve(self, B):
        return self.indefinite.solve(B)

    def logabsdet(self):
        return self.indefinite.logabsdet()

    def _inverse_diagonal(self):
        return self.indefinite.inverse_diagonal()

    def quadratic_diagonal(self, Psi):
        return self.indefinite.quadratic_diagonal(Psi)

    def _factor_arrays(self):
        return {"eigenvalues": self.indefinite.eigenvalues,
                "eigenvectors": self.indefinite.eigenvectors}

    @classmethod
    def from_state(cls, state, *, noise_variance, jitter, signs):
        """ValueError unless M has as many negative eigenvalues as S has -1 entries (the
        inertia of a positive definite covariance, class docstring)."""
        eigenvalues = state["eigenvalues"]
        n_negative, expected = int(np.sum(eigenvalues < 0)), int(np.sum(signs < 0))
        if n_negative != expected:
            raise ValueError(f"array 'eigenvalues' has {n_negative} negative values, but "
                             f"{expected} are expected from its signs: the stored system is "
                             "not that of a positive definite covariance")
        return cls(noise_variance, state["beta"], jitter, signs,
                   linalg.SymmetricFactorization(eigenvalues, state["eigenvectors"]))


class RepairedSystem(CholeskySystem):
    """The Cholesky system of the repaired features Psi+ = Psi T (r <= m columns): M, beta and
    the factor live in the r-dimensional repaired space (docs/positive-part.md)."""

    name = "repaired"
    signed = True
    # beta and L in the r repaired features ("r"); T (m x r) and the ascending spectrum of the
    # signed Gram matrix (at most m eigenvalues, exactly r of them positive)
    STORED = {"beta": Array(("r",)), "cholesky_factor": Array(("r", "r"), ("finite", "cholesky")),
              POSITIVE_PART_PREFIX + "transform": Array(("m", "r")),
              POSITIVE_PART_PREFIX + "eigenvalues": Array(("spectrum",))}

    def __init__(self, noise_variance, beta, jitter, cholesky_factor, part: PositivePart):
        super().__init__(noise_variance, beta, jitter, cholesky_factor)
        self._positive_part = part

    @property
    def positive_part(self) -> PositivePart:
        return self._positive_part

    def project(self, Psi):
        return self._positive_part.project(Psi)

    def _factor_arrays(self):
        return {"cholesky_factor": self.cholesky_factor,
                POSITIVE_PART_PREFIX + "transform": self._positive_part.transform,
                POSITIVE_PART_PREFIX + "eigenvalues": self._positive_part.eigenvalues}

    @classmethod
    def from_state(cls, state, *, noise_variance, jitter, signs):
        """ValueError unless the spectrum is ascending (as the eigen-decomposition writes it)
        and holds exactly r positive eigenvalues among at most m, r <= m."""
        transform = state[POSITIVE_PART_PREFIX + "transform"]
        spectrum = state[POSITIVE_PART_PREFIX + "eigenvalues"]
        (m, k), size = transform.shape, spectrum.size
        if k > m or size > m:
            raise ValueError(f"the repaired system has {k} features and a spectrum of {size} "
                             f"eigenvalues, but its feature map has only {m}")
        if np.any(np.diff(spectrum) < 0):
            raise ValueError(f"array {POSITIVE_PART_PREFIX + 'eigenvalues'!r} is not in "
                             "ascending order (as the eigen-decomposition writes it)")
        if int(np.sum(spectrum > 0)) != k:
            raise ValueError(f"array {POSITIVE_PART_PREFIX + 'eigenvalues'!r} has "
                             f"{int(np.sum(spectrum > 0))} positive values, but the repaired "
                             f"system has {k} features (one per positive eigenvalue)")
        part = PositivePart(transform, spectrum)
        return cls(noise_variance, state["beta"], jitter, state["cholesky_factor"], part)


#: The kinds of :class:`FactorizedSystem` by their model-file name.
SYSTEMS = {cls.name: cls for cls in (CholeskySystem, EigenSystem, RepairedSystem)}
