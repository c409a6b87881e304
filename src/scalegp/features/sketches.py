"""Polynomial sketches: random maps Phi_n with E[Phi_n(u)^T Phi_n(v)] = (u^T v)^n.

Wacker & Filippone 2022, Appendix A and Table 1; Wacker, Kanagawa & Filippone, "Improved
random features for dot product kernels", Sections 3-4 (docs/maclaurin.md, "Polynomial sketches").

Every sketch of degree n with D features is stored as n projection matrices W_1..W_n of
shape (d, D) (the array ``projections`` of shape batch + (n, d, D)), so that one code path
evaluates them all:

* product sketches (``"rademacher"``, ``"gaussian"``, their ``"complex-..."`` variants and
  ``"srht"`` / ``"complex-srht"``): Phi_n(u) = (W_1^T u) * ... * (W_n^T u) / sqrt(D), the
  products elementwise (Kar & Karnick 2012). TensorSRHT's block b of factor i is
  (H S_{i,b} u)_{pi_{i,b}} (H the d x d Sylvester-Hadamard matrix, S a Rademacher diagonal,
  pi a row permutation, d padded to a power of 2): its rows are the columns of W_i, so the
  matrix is formed once and the FWHT, a speed-up for large d only, is not needed;
* ``"tensorsketch"`` (Pham & Pagh 2013): W_i is the CountSketch matrix (one sign s_i(k) in
  row k, column h_i(k)) and Phi_n(u) = IFFT(FFT(W_1^T u) * ... * FFT(W_n^T u)), a circular
  convolution with real output and no 1/sqrt(D) factor.

Complex sketches (complex Rademacher on {1, -1, i, -i}, complex Gaussian CN(0, 1), complex
TensorSRHT) estimate Re(Phi_n(u)^T conj(Phi_n(v))). They are returned in real arithmetic as
the 2D real columns [Re Phi_n(u), Im Phi_n(u)] ("complex-to-real"): the real inner product
of two such rows is Re Phi_n(u)^T Re Phi_n(v) + Im Phi_n(u)^T Im Phi_n(v) =
Re(Phi_n(u)^T conj(Phi_n(v))) exactly, so a complex sketch with D complex features has 2D
real columns.

:func:`sketch_variance` is the closed-form variance of each (Table 1, with the exact
TensorSketch formula derived for this library (docs/maclaurin.md, "Polynomial sketches"); the
authors' ``pseudo_var_tensor_sketch`` is not exact for n >= 2).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import hadamard

#: The sketch types; the ``"complex-*"`` ones have 2 real columns per feature.
SKETCHES = ("rademacher", "gaussian", "complex-rademacher", "complex-gaussian", "srht",
            "complex-srht", "tensorsketch")


def check_sketch(sketch) -> str:
    if sketch not in SKETCHES:
        raise ValueError(f"sketch must be one of {', '.join(SKETCHES)}; got {sketch!r}")
    return sketch


def is_complex(sketch: str) -> bool:
    return check_sketch(sketch).startswith("complex-")


def columns_per_feature(sketch: str) -> int:
    """Real columns of one sketch feature: 2 for complex sketches ([Re, Im]), else 1."""
    return 2 if is_complex(sketch) else 1


def padded_dims(n_dims: int) -> int:
    """d rounded up to a power of 2 (TensorSRHT's Hadamard size)."""
    return 1 << max(int(n_dims) - 1, 0).bit_length()


def _rademacher(rng, shape, complex_: bool):
    signs = rng.choice(np.array([-1.0, 1.0]), size=shape)
    if not complex_:
        return signs
    return np.where(rng.random(shape) < 0.5, signs, 1j * signs)


def draw_projections(sketch: str, degree: int, n_dims: int, n_features: int,
                     rng: np.random.Generator, batch: tuple = ()) -> np.ndarray:
    """The projection matrices of ``batch`` independent sketches, shape
    batch + (degree, n_dims, n_features), complex for complex sketches.

    TensorSRHT draws, per factor and per block of d_pad = :func:`padded_dims` rows, a
    Rademacher diagonal and a permutation (independent blocks) and keeps
    the rows of the first n_dims inputs (the padding zeros meet the others).
    """
    check_sketch(sketch)
    shape = (*batch, degree, n_dims, n_features)
    if sketch in ("rademacher", "complex-rademacher"):
        return _rademacher(rng, shape, is_complex(sketch))
    if sketch == "gaussian":
        return rng.standard_normal(shape)
    if sketch == "complex-gaussian":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / math.sqrt(2.0)
    if sketch == "tensorsketch":
        buckets = rng.integers(0, n_features, size=(*batch, degree, n_dims))
        signs = rng.choice(np.array([-1.0, 1.0]), size=(*batch, degree, n_dims))
        return signs[..., None] * (buckets[..., None] == np.arange(n_features))
    d_pad = padded_dims(n_dims)
    n_blocks = -(-n_features // d_pad)
    H = hadamard(d_pad).astype(float)
    diagonals = _rademacher(rng, (*batch, degree, n_blocks, d_pad), sketch == "complex-srht")
    rows = rng.permuted(np.broadcast_to(np.arange(d_pad), diagonals.shape), axis=-1)
    # column j of block b: w_j = H[pi_b(j), :] * S_b, restricted to the first n_dims inputs
    W = H[rows] * diagonals[..., None, :]                 # (..., blocks, d_pad rows, d_pad)
    W = np.moveaxis(W[..., :n_dims], -1, -3)              # (..., n_dims, blocks, d_pad rows)
    return W.reshape(*W.shape[:-2], n_blocks * d_pad)[..., :n_features]


def apply(sketch: str, projections: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Phi_n(U) of the rows of U (n_samples, d), shape batch + (n_samples, D) or, for a
    complex sketch, batch + (n_samples, 2D) real columns [Re, Im]."""
    return combine(sketch, project(projections, U))


def project(projections: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The factors P_i = U W_i, shape batch + (degree, n_samples, D)."""
    return U @ projections


def combine(sketch: str, factors: np.ndarray) -> np.ndarray:
    """Phi_n from its factors P_i (:func:`project`): the elementwise product / sqrt(D), or for
    TensorSketch the circular convolution IFFT(prod_i FFT(P_i)); real [Re, Im] columns."""
    n_features = factors.shape[-1]
    if sketch == "tensorsketch":
        return np.fft.ifft(np.prod(np.fft.fft(factors, axis=-1), axis=-3), axis=-1).real
    out = np.prod(factors, axis=-3) / math.sqrt(n_features)
    if is_complex(sketch):
        return np.concatenate([out.real, out.imag], axis=-1)
    return out


def combine_derivative(sketch: str, factors: np.ndarray, dfactors: np.ndarray) -> np.ndarray:
    """d Phi_n for factor derivatives dP_i (same shape as the factors): the product rule
    sum_i combine(P_1, .., dP_i, .., P_n), real [Re, Im] columns for complex sketches."""
    degree = factors.shape[-3]
    total = 0.0
    for i in range(degree):
        replaced = factors.copy()
        replaced[..., i, :, :] = dfactors[..., i, :, :]
        total = total + combine(sketch, replaced)
    return total


# ------------------------------------------------------------------ closed-form variances
def pair_moments(u: np.ndarray, v: np.ndarray):
    """t = u^T v, N = |u|^2 |v|^2, S = sum_k u_k^2 v_k^2 (docs/maclaurin.md, "Polynomial sketches"), over the last axis."""
    t = np.sum(u * v, axis=-1)
    N = np.sum(u * u, axis=-1) * np.sum(v * v, axis=-1)
    S = np.sum(u * u * v * v, axis=-1)
    return t, N, S


def correlated_pairs(n_features, n_dims_padded: int):
    """P(D) = floor(D/d) d (d-1) + (D mod d)(D mod d - 1): ordered pairs of TensorSRHT rows
    in a common block."""
    n_features = np.asarray(n_features)
    rest = n_features % n_dims_padded
    return (n_features // n_dims_padded) * n_dims_padded * (n_dims_padded - 1) + rest * (rest - 1)


def variance_terms(sketch: str, degree: int, u, v, n_dims_padded: int | None = None):
    """(V1, C) with Var = V1 / D + P(D) C / D^2 for product sketches and TensorSRHT (C = 0 for
    the plain product sketches): V1 is the single-feature variance m^n - t^{2n} (of Re k for
    complex sketches), C the covariance of two rows of a TensorSRHT block. Not defined for
    TensorSketch, whose D-dependence differs (:func:`sketch_variance`)."""
    check_sketch(sketch)
    t, N, S = pair_moments(np.asarray(u, float), np.asarray(v, float))
    n, t2n = degree, t ** (2 * degree)
    C = np.zeros_like(t)
    if sketch == "gaussian":
        V1 = (N + 2 * t**2) ** n - t2n
    elif sketch in ("rademacher", "srht"):
        V1 = (N + 2 * t**2 - 2 * S) ** n - t2n
    elif sketch == "complex-gaussian":
        V1 = 0.5 * ((N + t**2) ** n + (2 * t**2) ** n) - t2n
    elif sketch in ("complex-rademacher", "complex-srht"):
        V1 = 0.5 * ((N + t**2 - S) ** n + (2 * t**2 - S) ** n) - t2n
    else:
        raise ValueError("TensorSketch has no (V1, C) form; use variance_parts")
    if sketch in ("srht", "complex-srht"):
        d = n_dims_padded if n_dims_padded is not None else padded_dims(np.shape(u)[-1])
        if d < 2:
            C = np.zeros_like(t)
        elif sketch == "srht":
            C = (t**2 - (N + t**2 - 2 * S) / (d - 1)) ** n - t2n
        else:
            C = 0.5 * ((t**2 - (t**2 - S) / (d - 1)) ** n + (t**2 - (N - S) / (d - 1)) ** n) - t2n
    return V1, C


def variance_parts(sketch: str, degree: int, u, v, n_dims_padded: int | None = None):
    """(a, b) with Var[Phi_n(u)^T Phi_n(v)] = a / D + b w(D) (:func:`correlation_weight`):
    (V1, C) of :func:`variance_terms` for product sketches and TensorSRHT; for TensorSketch
    a = M_B^n + M_C^n - 2 t^{2n}, b = M_BC^n - M_B^n - M_C^n + t^{2n} (docs/maclaurin.md,
    "Polynomial sketches")."""
    if sketch != "tensorsketch":
        return variance_terms(sketch, degree, u, v, n_dims_padded)
    t, N, S = pair_moments(np.asarray(u, float), np.asarray(v, float))
    n, t2n = degree, t ** (2 * degree)
    MB, MC, MBC = N + t**2 - S, 2 * t**2 - S, N + 2 * t**2 - 2 * S
    return MB**n + MC**n - 2 * t2n, MBC**n - MB**n - MC**n + t2n


def correlation_weight(sketch: str, n_features, n_dims_padded: int):
    """w(D): P(D) / D^2 for TensorSRHT, c_D = (1 or 2) / D^2 (D odd or even) for TensorSketch,
    0 for the plain product sketches."""
    D = np.asarray(n_features)
    if sketch in ("srht", "complex-srht"):
        return correlated_pairs(D, n_dims_padded) / D**2
    if sketch == "tensorsketch":
        return np.where(D % 2 == 0, 2.0, 1.0) / D**2
    return np.zeros(D.shape)


def sketch_variance(sketch: str, degree: int, n_features: int, u, v,
                    n_dims_padded: int | None = None):
    """Var[Phi_n(u)^T Phi_n(v)] in closed form (Re part for complex sketches; Table 1 of
    Wacker & Filippone 2022; docs/maclaurin.md, "Polynomial sketches"), for D = n_features features
    (complex features for complex sketches) and inputs u, v (..., d); d is padded to a power of 2
    for TensorSRHT.

    Product sketches: (m^n - t^{2n}) / D (m the per-feature second moment of Table 1);
    complex: (m^n + m_p^n)/2 - t^{2n} over D. TensorSRHT adds P(D) C / D^2.
    TensorSketch, exact (docs/maclaurin.md, "Polynomial sketches"): with M_B = N + t^2 - S, M_C = 2
    t^2 - S, M_BC = N + 2 t^2 - 2 S and c_D = 1/D^2 (D odd) or 2/D^2 (D even),

        Var = (M_B^n + M_C^n - 2 t^{2n}) / D + c_D (M_BC^n - M_B^n - M_C^n + t^{2n}).
    """
    check_sketch(sketch)
    d = n_dims_padded if n_dims_padded is not None else padded_dims(np.shape(u)[-1])
    a, b = variance_parts(sketch, degree, u, v, d)
    return a / n_features + b * correlation_weight(sketch, int(n_features), d)
