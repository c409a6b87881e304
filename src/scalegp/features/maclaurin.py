"""Maclaurin random features of the Gaussian kernel (Wacker & Filippone 2022, Eqs. 3-5).

With x~ = x / l (per dimension for ARD), the Gaussian kernel is (Eq. 3)

    k(x, y) = s e^{-|x~|^2/2} e^{-|y~|^2/2} sum_n (x~^T y~)^n / n!,

truncated at degree p to k_p. The map is (Eq. 4 for d = 1, Eq. 5 for d >= 2)

    psi(x) = sqrt(s) e^{-|x~|^2/2} (1, Phi_1(x~) / sqrt(1!), ..., Phi_p(x~) / sqrt(p!)),

with Phi_n(u) = u^n for d = 1 (``sketch="explicit"``: psi^T psi = k_p exactly) and, for
d >= 2, independent polynomial sketches with D_n features (:mod:`scalegp.features.sketches`), so
that E[psi(x)^T psi(y)] = k_p(x, y). The sketch draw does not depend on theta: l enters through
x~ and the prefactor, so the engine learns theta like for any map. The allocation D_1..D_p
and the degree p* are chosen by the incremental algorithm on a subsample (docs/maclaurin.md,
"Allocation and degree p*"; :func:`optimize_allocation`). docs/maclaurin.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammainc, gammaln

from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from ..stored import Array, Value
from . import sketches
from .base import FeatureMap, MapAtTheta, feature_dtype

#: p_min and p_max of the degree search (p_max = 15 as in the paper's code).
MIN_DEGREE, MAX_DEGREE = 2, 15
#: Rows of the training subsample the allocation is optimized on (M = 500).
N_SUBSAMPLE = 500


def _log_factorials(degree: int) -> np.ndarray:
    """log n! for n = 1..degree (n! itself overflows float64 from n = 171)."""
    return gammaln(np.arange(2, degree + 2, dtype=float))


def truncation_share(degree: int, r2) -> np.ndarray:
    """The share of k(x, x) = s that the degree-p truncation misses at x~ with |x~|^2 = r2:

        1 - k_p(x, x) / s = 1 - e^{-r2} sum_{n<=p} r2^n / n! = P(p + 1, r2),

    the regularized lower incomplete gamma function (the Maclaurin remainder of e^{r2}
    relative to e^{r2}; P[Poisson(r2) > p]). The tail k - k_p is positive semi-definite
    (the dropped terms are inner products of features), so |k(x, y) - k_p(x, y)| <=
    s sqrt(P(p + 1, |x~|^2) P(p + 1, |y~|^2)) for every pair (docs/local-models.md,
    "Where the truncation resolves a local model")."""
    return gammainc(degree + 1, np.asarray(r2, dtype=float))


@dataclass(frozen=True)
class AllocationStatistics:
    """Subsample averages (docs/maclaurin.md, "Allocation and degree
    p*"): per degree n, Var = a_n / D_n + b_n w(D_n) averaged with the prefactors c_ij^2 over pairs i > j (``a``, ``b``), and the squared truncation
    bias B_p averaged over all pairs (``bias``, index p = 0..p_max)."""

    sketch: str
    n_dims_padded: int
    a: np.ndarray
    b: np.ndarray
    bias: np.ndarray

    @classmethod
    def from_subsample(cls, U: np.ndarray, sketch: str, max_degree: int):
        """U: the subsample, centred and divided by l. Non-finite pair values are dropped
        from the means (docs/maclaurin.md, "Allocation and degree p*")."""
        d_pad = sketches.padded_dims(U.shape[1])
        i, j = np.tril_indices(len(U), k=-1)
        sq = np.sum(U * U, axis=1)
        c2 = np.exp(-(sq[i] + sq[j]))
        a, b = np.zeros(max_degree), np.zeros(max_degree)
        with np.errstate(over="ignore", invalid="ignore"):
            for n in range(1, max_degree + 1):
                parts = sketches.variance_parts(sketch, n, U[i], U[j], d_pad)
                a[n - 1], b[n - 1] = (_finite_mean(c2 * part) for part in parts)
            G = U @ U.T
            prefactor = np.exp(-0.5 * (sq[:, None] + sq[None, :]))
            exact = np.exp(-0.5 * (sq[:, None] + sq[None, :] - 2 * G))
            partial, term = np.ones_like(G), np.ones_like(G)
            bias = [_finite_mean((exact - prefactor * partial) ** 2)]
            for n in range(1, max_degree + 1):
                term = term * G / n
                partial = partial + term
                bias.append(_finite_mean((exact - prefactor * partial) ** 2))
        return cls(sketch, d_pad, a, b, np.array(bias))

    def degree_variance(self, n: int, n_features) -> np.ndarray:
        """g_n(D_n) / (n!)^2: the variance degree n adds with D_n features."""
        D = np.asarray(n_features, dtype=float)
        g = (self.a[n - 1] / D
             + self.b[n - 1] * sketches.correlation_weight(self.sketch, D.astype(int),
                                                           self.n_dims_padded))
        return g / math.factorial(n) ** 2

    def objective(self, allocation) -> float:
        """L_p = sum_n g_n(D_n) / (n!)^2 + B_p (docs/maclaurin.md, "Allocation and degree p*"), p = len(allocation)."""
        return float(sum(self.degree_variance(n, D) for n, D in enumerate(allocation, 1))
                     + self.bias[len(allocation)])


def _finite_mean(values: np.ndarray) -> float:
    finite = np.isfinite(values)
    return float(values[finite].mean()) if finite.any() else 0.0


def greedy_allocation(stats: AllocationStatistics, degree: int, budget: int) -> list[int]:
    """The incremental algorithm for a fixed degree: start at D_n = 1 and give each further
    feature to the degree whose objective drops most (ties to the larger n; if none drops, to
    n = 1, as the authors' code)."""
    allocation = np.ones(degree, dtype=int)
    degrees = np.arange(1, degree + 1)

    def gains(n):
        D = allocation[n - 1]
        return stats.degree_variance(n, D) - stats.degree_variance(n, D + 1)

    gain = np.array([gains(n) for n in degrees], dtype=float)
    for _ in range(budget - degree):
        best = degree - int(np.argmax(gain[::-1]))       # the largest n among the maxima
        n = best if gain[best - 1] >= 0 else 1
        allocation[n - 1] += 1
        gain[n - 1] = gains(n)
    return allocation.tolist()


def optimize_allocation(stats: AllocationStatistics, budget: int, min_degree: int = MIN_DEGREE,
                        max_degree: int = MAX_DEGREE) -> tuple[list[int], float]:
    """(D_1..D_{p*}, L_{p*}): the greedy allocation of every degree p in
    [min_degree, min(budget, max_degree)] and the best of them (ties to the larger p)."""
    best = None
    for degree in range(min(min_degree, budget), min(budget, max_degree) + 1):
        allocation = greedy_allocation(stats, degree, budget)
        score = stats.objective(allocation)
        if best is None or score <= best[1]:
            best = (allocation, score)
    return best


def uniform_allocation(degree: int, budget: int) -> list[int]:
    """budget features spread as evenly as possible over degrees 1..degree."""
    return [budget // degree + (n < budget % degree) for n in range(degree)]


@dataclass(frozen=True, eq=False)
class MaclaurinFeatures(FeatureMap, name="maclaurin"):
    """Maclaurin features of the Gaussian kernel: explicit (d = 1) or sketched (Eq. 5).

    Attributes
    ----------
    sketch : str
        ``"explicit"`` (d = 1) or one of :data:`scalegp.features.sketches.SKETCHES`.
    allocation : ndarray of int, shape (p,)
        D_n, the features of degree n (complex features for complex sketches: 2 columns each).
    projections : ndarray, shape (n_dims, sum_n n D_n)
        The sketch matrices W_{n,1..n} side by side (real part for complex sketches).
    projections_imag : ndarray or None
        Their imaginary part (complex sketches), else None.
    expected_error : float
        L_{p*} of the allocation (E[(k - k_p)^2 + Var] / s^2 on the subsample),
        NaN when the allocation was given or the map is explicit.
    """

    sketch: str
    allocation: np.ndarray
    projections: np.ndarray
    projections_imag: np.ndarray | None = None
    expected_error: float = math.nan

    # D_n per degree; the sketch matrices side by side (sum_n n D_n columns, checked by the
    # map; the imaginary part: complex sketches only)
    STORED = {"sketch": Value("str", choices=("explicit", *sketches.SKETCHES)),
              "allocation": Array(("degree",), ("at_least_one",), kind="int"),
              "projections": Array(("d", "projection_columns")),
              "projections_imag": Array(("d", "projection_columns")),
              "expected_error": Value("number", "nan_or_nonnegative")}

    description = "Maclaurin features of the Gaussian kernel: explicit (1-D) or sketched"
    reference = "Wacker & Filippone 2022, Eqs. 3-5; Wacker, Kanagawa & Filippone 2022"

    def __post_init__(self):
        """The fields agree (a model file's are rebuilt through here): D_n >= 1 integers; W
        finite, of shape (n_dims, sum_n n D_n), with an imaginary part exactly for a complex
        sketch; the explicit map (d = 1) has D_n = 1 and W = 1 (Phi_n(u) = u^n)."""
        explicit = self.sketch == "explicit"
        if not explicit:
            sketches.check_sketch(self.sketch)
        allocation = np.asarray(self.allocation)
        if allocation.ndim != 1 or allocation.dtype.kind not in "iu" or np.any(allocation < 1):
            raise ValueError(f"allocation must be a 1-D array of integers >= 1, got "
                             f"{allocation!r}")
        columns = int(np.sum(np.arange(1, allocation.size + 1) * allocation))
        parts = {"projections": self.projections, "projections_imag": self.projections_imag}
        if (self.projections_imag is not None) != (not explicit
                                                   and sketches.is_complex(self.sketch)):
            raise ValueError(f"projections_imag must be given exactly for a complex sketch "
                             f"(sketch {self.sketch!r})")
        for name, W in parts.items():
            if W is None:
                continue
            W = np.asarray(W)
            if W.shape != (self.n_dims, columns) or not np.all(np.isfinite(W)):
                raise ValueError(f"{name} must be finite, of shape (n_dims, sum_n n D_n) = "
                                 f"{(self.n_dims, columns)}, got shape {W.shape}")
        if explicit and (self.n_dims != 1 or np.any(allocation != 1)
                         or np.any(self.projections != 1)):
            raise ValueError("the explicit map (d = 1) has allocation 1 per degree and "
                             "projections 1")
        error = self.expected_error
        if not (isinstance(error, (int, float)) and not isinstance(error, bool)
                and (math.isnan(error) or 0 <= error < math.inf)):
            raise ValueError(f"expected_error must be NaN or a finite number >= 0, got "
                             f"{error!r}")

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Gaussian kernel only: the expansion is of exp(x~^T y~) (Eq. 3)."""
        return kernel.spectral_measure_is_standard_normal

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, sketch=None,
              allocation=None, min_degree: int = MIN_DEGREE, max_degree: int = MAX_DEGREE,
              n_subsample: int = N_SUBSAMPLE):
        """Build the map for m = n_components columns (the map reports its actual m).

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian
            Its length scales at build time scale the allocation's subsample.
        n_components : int
            m = 1 + sum_n D_n (complex sketches: 1 + 2 sum_n D_n <= m).
        rng : Generator or seed
        sketch : str, optional
            ``"explicit"`` (default for d = 1: degree p = m - 1, psi^T psi = k_p exactly) or
            a sketch of :data:`scalegp.features.sketches.SKETCHES` (default ``"rademacher"``).
        allocation : sequence of int, optional
            D_1..D_p given (sum <= budget); default: optimized (docs/maclaurin.md, "Allocation and degree p*").
        min_degree, max_degree : int
            The degree search range (2 and 15).
        n_subsample : int
            Rows of X the allocation is optimized on (500), centred by their mean.

        Raises
        ------
        TypeError
            If the kernel is not Gaussian.
        """
        if not cls.supports(kernel):
            raise TypeError(f"maclaurin features are defined for the Gaussian kernel only "
                            f"(the Maclaurin series of exp(x^T y / l^2), Eq. 3), got {kernel!r}")
        X = check_matrix(X, "X")
        n_dims = X.shape[1]
        kernel.check_n_dims(n_dims)
        n_components = check_positive_int(n_components, "n_components")
        sketch = ("explicit" if n_dims == 1 else "rademacher") if sketch is None else sketch
        if sketch == "explicit":
            if n_dims != 1 or allocation is not None:
                raise ValueError("sketch='explicit' is the 1-D map of Eq. 4 (degree "
                                 "n_components - 1, no allocation); use a sketch for d >= 2")
            degree = n_components - 1
            return cls(n_dims=1, sketch="explicit", allocation=np.ones(degree, dtype=int),
                       projections=np.ones((1, degree * (degree + 1) // 2)))
        sketches.check_sketch(sketch)
        rng = as_generator(rng)
        budget = (n_components - 1) // sketches.columns_per_feature(sketch)
        expected_error = math.nan
        if allocation is None:
            min_degree = check_positive_int(min_degree, "min_degree")
            max_degree = check_positive_int(max_degree, "max_degree")
            (sub_rng,) = rng.spawn(1)
            rows = sub_rng.permutation(len(X))[:check_positive_int(n_subsample, "n_subsample")]
            U = (X[rows] - X[rows].mean(axis=0)) / kernel.length_scale
            stats = AllocationStatistics.from_subsample(U, sketch, max_degree)
            allocation, expected_error = (optimize_allocation(stats, budget, min_degree,
                                                              max_degree)
                                          if budget else ([], stats.objective([])))
        allocation = np.asarray(allocation, dtype=int).reshape(-1)
        if np.any(allocation < 1) or allocation.sum() > budget:
            raise ValueError(f"allocation must have entries >= 1 summing to at most {budget} "
                             f"(n_components={n_components}, sketch={sketch!r}), got "
                             f"{allocation.tolist()}")
        blocks = [sketches.draw_projections(sketch, n, n_dims, int(D), rng)
                  for n, D in enumerate(allocation, 1)]
        W = np.concatenate([np.concatenate(list(block), axis=1) for block in blocks], axis=1) \
            if blocks else np.zeros((n_dims, 0))
        return cls(n_dims=n_dims, sketch=sketch, allocation=allocation,
                   projections=np.ascontiguousarray(W.real),
                   projections_imag=np.ascontiguousarray(W.imag) if np.iscomplexobj(W) else None,
                   expected_error=expected_error)

    # ----------------------------------------------------------------- structure
    @property
    def degree(self) -> int:
        """p (p* when optimized)."""
        return len(self.allocation)

    @property
    def n_components(self) -> int:
        columns = 1 if self.sketch == "explicit" else sketches.columns_per_feature(self.sketch)
        return 1 + columns * int(np.sum(self.allocation))

    def _projection_blocks(self):
        """(n, W_n of shape (n, d, D_n)) per degree."""
        W = self.projections if self.projections_imag is None else (
            self.projections + 1j * self.projections_imag)
        start = 0
        for n, D in enumerate(self.allocation, 1):
            block = W[:, start:start + n * D]
            start += n * D
            yield n, np.stack(np.split(block, n, axis=1))

    def at(self, kernel: Kernel) -> "MaclaurinAtTheta":
        return MaclaurinAtTheta(self, kernel)

    def truncation_share(self, r2) -> np.ndarray:
        """P(p + 1, r2): the share of the prior variance the truncation at p misses at
        squared scaled distance r2 from the expansion point (:func:`truncation_share`)."""
        return truncation_share(self.degree, r2)

    def centred_kernel_error(self, U, kernel: Kernel) -> np.ndarray:
        """Per row u of U (inputs minus the expansion point), the scale of the error of
        psi(u)^T psi(u) against k(u, u) = s: the truncation's bias s P(p + 1, |u~|^2) plus
        the sketch's standard deviation sqrt(Var[psi(u)^T psi(u)]) (0 for the explicit map)
        (docs/local-models.md, "Where the truncation resolves a local model")."""
        U = self.check_input(U, kernel).astype(float)
        scaled = U / kernel.length_scale
        bias = kernel.variance * self.truncation_share(np.sum(scaled * scaled, axis=1))
        # the closed-form variance is 0 up to rounding where the sketch is exact (1-D)
        return bias + np.sqrt(np.maximum(self.kernel_variance(U, U, kernel), 0.0))

    def kernel_variance(self, X, Y, kernel: Kernel) -> np.ndarray:
        """Var[psi(x)^T psi(y)] of the randomized map for pairs of rows (Eq. 5 variance):
        s^2 e^{-|x~|^2 - |y~|^2} sum_n Var[Phi_n(x~)^T Phi_n(y~)] / (n!)^2."""
        if self.sketch == "explicit":
            return np.zeros(len(X))
        U, V = (self.check_input(Z, kernel).astype(float) / kernel.length_scale for Z in (X, Y))
        total = sum(sketches.sketch_variance(self.sketch, n, D, U, V) / math.factorial(n) ** 2
                    for n, D in enumerate(self.allocation, 1))
        return kernel.variance**2 * np.exp(-np.sum(U * U + V * V, axis=1)) * total


class MaclaurinAtTheta(MapAtTheta):
    """psi at fixed theta; features and their gradient from one evaluation of the factors.

    With u = x~ and q = sqrt(s) e^{-|u|^2/2}: d u / d log l_j = -u_j e_j, so
    d psi / d log l_j = psi u_j^2 + q (0, d Phi_n / d log l_j / sqrt(n!)) with the product
    rule over the factors P_i = u^T W_i (d P_i = -u_j W_i[j]); for one isotropic l the sum
    over j, d Phi_n / d log l = -n Phi_n (Phi_n is homogeneous of degree n);
    d psi / d log s = psi / 2.
    """

    def __init__(self, feature_map: MaclaurinFeatures, kernel: Kernel):
        super().__init__(feature_map, kernel)
        self.blocks = list(feature_map._projection_blocks())
        self.kind = feature_map.sketch
        self.scales = np.exp(0.5 * _log_factorials(feature_map.degree))

    def _explicit(self, U, with_grad: bool):
        """The 1-D map of Eq. 4 in log space, so that no degree overflows:
        psi_n = sign(u)^n sqrt(s) exp(n log|u| - u^2 / 2 - log(n!) / 2) (each term is at
        most sqrt(s): they are the square roots of the Poisson(u^2) probabilities), and
        d psi_n / d log l = psi_n (u^2 - n), d psi / d log s = psi / 2."""
        u = U[:, 0]
        n = np.arange(self.feature_map.degree + 1, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_terms = n * np.log(np.abs(u))[:, None] - 0.5 * np.concatenate(
                [[0.0], _log_factorials(self.feature_map.degree)])
        log_terms[:, 0] = 0.0                       # u^0 = 1, also at u = 0
        signs = np.where((u[:, None] < 0) & (n % 2 == 1), -1.0, 1.0)
        Psi = (math.sqrt(self.kernel.variance) * signs
               * np.exp(log_terms - 0.5 * (u * u)[:, None]))
        if not with_grad:
            return Psi, None
        return Psi, np.stack([Psi * ((u * u)[:, None] - n), 0.5 * Psi])

    def _evaluate(self, X, with_grad: bool):
        X = self.check_input(X)
        dtype = feature_dtype(X)
        U = X.astype(np.float64) / self.kernel.length_scale
        if self.kind == "explicit":
            Psi, dPsi = self._explicit(U, with_grad)
            return Psi.astype(dtype, copy=False), (None if dPsi is None
                                                   else dPsi.astype(dtype, copy=False))
        q = math.sqrt(self.kernel.variance) * np.exp(-0.5 * np.sum(U * U, axis=1))
        columns, grads = [np.ones((len(U), 1))], []
        anisotropic = self.kernel.anisotropic
        for (n, W), scale in zip(self.blocks, self.scales):
            factors = sketches.project(W, U)
            Phi = sketches.combine(self.kind, factors)
            columns.append(Phi / scale)
            if not with_grad:
                continue
            if anisotropic:
                grads.append(np.stack([
                    sketches.combine_derivative(
                        self.kind, factors, -U[None, :, j, None] * W[:, None, j, :])
                    for j in range(U.shape[1])]) / scale)
            else:
                grads.append(-n * Phi[None] / scale)
        Psi = q[:, None] * np.concatenate(columns, axis=1)
        if not with_grad:
            return Psi.astype(dtype, copy=False), None
        n_scales = U.shape[1] if anisotropic else 1
        polynomial = np.concatenate([np.zeros((n_scales, len(U), 1))] + grads, axis=2)
        square = U**2 if anisotropic else np.sum(U * U, axis=1, keepdims=True)
        dPsi = Psi[None] * square.T[:, :, None] + q[None, :, None] * polynomial
        dPsi = np.concatenate([dPsi, 0.5 * Psi[None]])
        return Psi.astype(dtype, copy=False), dPsi.astype(dtype, copy=False)

    def features(self, X) -> np.ndarray:
        return self._evaluate(X, with_grad=False)[0]

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        return self._evaluate(X, with_grad=True)
