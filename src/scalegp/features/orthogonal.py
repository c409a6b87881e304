"""Orthogonal random features (Yu, Suresh, Choromanski, Holtmann-Rice & Kumar, "Orthogonal
random features", NIPS 2016): "orf", Haar-orthogonal blocks with chi radii (their Section 3),
and "sorf", the structured blocks sqrt(p) H D1 H D2 H D3 applied by a fast Walsh-Hadamard
transform (their Section 4).

Both couple the *Gaussian factor* of the frequencies. A kernel whose base spectral law is a
Gaussian scale mixture, omega = t * g with g ~ N(0, I_d) independent of the scale t (``*``
elementwise), says so (``Kernel.scale_mixture``: "radial" for one scalar t per frequency,
"per_dimension" for t_j per coordinate) and draws t (``Kernel.sample_mixture_scales``); the
laws of t are tabulated in docs/conventions.md, "Spectral laws the maps ask for". Then
E cos(omega^T z) = E_t exp(-|t * z|^2 / 2) is the kernel's correlation. The rows g_l are
orthogonal within a block and each is marginally N(0, I_d); the scales t_l are drawn
independently per frequency, so each omega_l keeps the exact marginal law of the kernel's
base distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import hadamard

from .. import linalg
from .._validation import as_generator, check_matrix
from ..kernels import Kernel
from ..stored import Array
from ._fourier import FourierFeatureMap
from .random_fourier import (data_centre, draw_phase_shifts, monte_carlo_frequencies,
                             monte_carlo_weights)

#: A Walsh-Hadamard stage is one matrix product with a dense H_r, r <= 2^4 (see
#: :func:`walsh_hadamard`).
MAX_STAGE_BITS = 4

#: Elements of one chunk of the SORF phase computation (1 MiB of float64): keeps the
#: transform's working set in cache and its memory independent of n_samples (measured
#: fastest among 2^13 ... 2^19 for d = 16, S = 512).
CHUNK_ELEMENTS = 1 << 17

SORF_RADII = ("chi", "fixed")

#: Smallest SORF block: a p = 2 block has rows (+-1, +-1) / sqrt(2) only, and small blocks
#: have few distinct row directions, hence a large bias. Measured (chi radii, d = 2, |z| = 2
#: along an axis): -0.21 (p = 2), -0.14 (4), -0.029 (8), -0.005 (16), -0.002 (32). The cost
#: per frequency grows only like log p.
MIN_BLOCK_SIZE = 16


# ----------------------------------------------------------------------------- support

def require_support(cls, kernel: Kernel, reason: str) -> None:
    """Raise a ValueError naming the map, the kernel and the reason unless supported."""
    if not cls.supports(kernel):
        raise ValueError(f"kernel {kernel!r} is not supported by {cls.name}: {reason}")


# ----------------------------------------------------------------------------- ORF

def haar_orthogonal(shape: tuple[int, int, int], rng: np.random.Generator) -> np.ndarray:
    """A stack of Haar-distributed orthogonal matrices, shape (n_blocks, d, d).

    Q R = G with G Gaussian, then Q <- Q diag(sign(diag R)): the sign fix makes Q exactly
    Haar (Mezzadri, "How to generate random matrices from the classical compact groups",
    Notices AMS 2007).
    """
    Q, R = linalg.qr(rng.standard_normal(shape))
    return Q * np.sign(np.diagonal(R, axis1=1, axis2=2))[:, None, :]


def orthogonal_gaussian_rows(n_rows: int, n_dims: int, rng: np.random.Generator) -> np.ndarray:
    """Rows marginally N(0, I_d), orthogonal within consecutive blocks of d rows.

    G = [S_1 Q_1; S_2 Q_2; ...] truncated to ``n_rows`` rows, Q_b Haar and S_b diagonal with
    independent chi(d) entries (Yu et al. 2016, Section 3, W_ORF = S Q / sigma): a row of a
    Haar matrix is uniform on the sphere, and a chi(d) radius times a uniform direction is
    N(0, I_d).
    """
    n_blocks = -(-n_rows // n_dims)
    rotation_rng, radius_rng = rng.spawn(2)
    Q = haar_orthogonal((n_blocks, n_dims, n_dims), rotation_rng)
    radii = np.sqrt(radius_rng.chisquare(n_dims, size=(n_blocks, n_dims, 1)))
    return (radii * Q).reshape(-1, n_dims)[:n_rows]


@dataclass(frozen=True, eq=False)
class OrthogonalRandomFeatures(FourierFeatureMap, name="orf"):
    r"""Orthogonal random features: Haar-orthogonal blocks with chi radii.

    Notes
    -----
    Yu et al. (2016), Section 3: for the Gaussian kernel, W_ORF = S Q / sigma, Q uniformly
    random orthogonal and S diagonal with chi(d) entries; each row is exactly N(0, I_d), so
    the estimate is unbiased (their Lemma 1) and for d > 1 has smaller variance than RFF
    (their Theorem 1). With S = n_components / 2 frequencies (an odd n_components adds one
    row with a single phase-shifted cosine, module ``_fourier``), ceil(S / d) independent
    d x d blocks are stacked and the first S rows kept:

        psi(x) = sqrt(s / S) [cos(omega_l^T (x - c) / l), sin(omega_l^T (x - c) / l)]_l,
        omega_l = t_l * g_l,   g = rows of [S_1 Q_1; S_2 Q_2; ...],

    with t_l the scale of the kernel's Gaussian scale mixture (module docstring): 1 for the
    Gaussian kernel; the Student-t scale for Matern, which makes omega_l an orthogonal
    direction times the radius of a multivariate t (as Choromanski et al., "The geometry of
    random features", AISTATS 2018, do for radial kernels); per-dimension Laplace / Cauchy
    scales for the product kernels Cauchy and Laplacian. Every omega_l has the exact marginal
    law, so the estimate is unbiased for all four families; for the product kernels the
    per-dimension scales break the orthogonality of omega (only the Gaussian factors are
    orthogonal), so the gain over RFF is smaller there.
    """

    description = "orthogonal random features: Haar-orthogonal blocks with chi radii"
    reference = "Yu, Suresh, Choromanski, Holtmann-Rice & Kumar, NIPS 2016, Section 3"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Kernels with a Gaussian scale-mixture form (``kernel.scale_mixture``)."""
        return kernel.scale_mixture is not None

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, **options):
        """Draw the orthogonal blocks, their radii and the mixture scales.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Kernel
        n_components : int
            Number of real columns: n_components // 2 cos/sin pairs, and for an odd count one
            more frequency (the next orthogonal row) with a single phase-shifted cosine.
        rng : numpy.random.Generator
            The only source of randomness.
        """
        if options:
            raise TypeError(f"orf takes no options, got {sorted(options)}")
        X = check_matrix(X, "X")
        require_support(cls, kernel, "no Gaussian scale-mixture form is known for it")
        kernel.check_n_dims(X.shape[1])
        n_frequencies, n_single = monte_carlo_frequencies(n_components)
        n_dims = X.shape[1]
        rng = as_generator(rng)
        direction_rng, scale_rng = rng.spawn(2)
        omega = (orthogonal_gaussian_rows(n_frequencies, n_dims, direction_rng)
                 * kernel.sample_mixture_scales(n_frequencies, n_dims, scale_rng))
        return cls(n_dims=n_dims, omega=omega,
                   frequency_weights=monte_carlo_weights(n_frequencies, n_single),
                   offset=data_centre(X), phase_shifts=draw_phase_shifts(rng, n_single))


# ----------------------------------------------------------------------------- SORF

def _stage_sizes(size: int) -> list[int]:
    """Split log2(size) bits into the fewest stages of at most MAX_STAGE_BITS bits each."""
    bits = size.bit_length() - 1
    n_stages = -(-bits // MAX_STAGE_BITS)
    return [1 << (bits // n_stages + (stage < bits % n_stages)) for stage in range(n_stages)]


def walsh_hadamard(X: np.ndarray, axis: int = 0) -> np.ndarray:
    r"""H_p X along one axis: the unnormalized Walsh-Hadamard transform, Sylvester order.

    Parameters
    ----------
    X : ndarray
        ``X.shape[axis]`` = p, a power of two; float32 stays float32.
    axis : int, default 0

    Returns
    -------
    ndarray of the shape of X; for 2-D X and axis 0, ``scipy.linalg.hadamard(p) @ X``.

    Notes
    -----
    Sylvester's construction gives H_p = H_{r_1} (x) H_{r_2} (x) ... (x) H_{r_k} for any
    factorization p = r_1 ... r_k into powers of two, and by the mixed-product property
    H_p = prod_i (I_{a_i} (x) H_{r_i} (x) I_{b_i}), a_i = r_1 ... r_{i-1}, b_i = p / (a_i r_i).
    Each factor is one (batched) matrix product with the dense r_i x r_i Hadamard matrix,
    r_i <= 16: the cost is p (r_1 + ... + r_k) = O(p log p) multiply-adds per column, as for
    the radix-2 butterflies (r_i = 2), but spent in a few large BLAS calls instead of
    log2(p) element-wise passes.
    """
    axis = axis % X.ndim
    p = X.shape[axis]
    if p < 1 or p & (p - 1):
        raise ValueError(f"X.shape[{axis}] must be a power of two, got {p}")
    if p == 1:
        return X.copy()                                                # H_1 = [1]
    outer = int(np.prod(X.shape[:axis]))
    inner = int(np.prod(X.shape[axis + 1:]))
    Y = np.ascontiguousarray(X)
    before = 1
    for size in _stage_sizes(p):
        after = p // (before * size)
        block = hadamard(size).astype(X.dtype)
        Y = np.matmul(block, Y.reshape(outer * before, size, after * inner))
        before *= size
    return Y.reshape(X.shape)


def next_power_of_two(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _check_block_size(block_size, n_dims: int) -> int:
    if block_size is None:
        return max(MIN_BLOCK_SIZE, next_power_of_two(n_dims))
    if (isinstance(block_size, (bool, np.bool_)) or not isinstance(block_size, (int, np.integer))
            or block_size < n_dims or block_size & (block_size - 1)):
        raise ValueError(
            f"block_size must be a power of two >= n_dims ({n_dims}) or None, got {block_size!r}"
        )
    return int(block_size)


def sorf_blocks(sign_diagonals: np.ndarray) -> np.ndarray:
    """The dense orthogonal blocks H D1 H D2 H D3 / p^(3/2), shape (n_blocks, p, p).

    ``sign_diagonals[i, b]`` is the diagonal of D_(i+1) of block b; H = ``hadamard(p)``, so
    H / sqrt(p) is orthogonal and so is each block.
    """
    p = sign_diagonals.shape[2]
    H = hadamard(p).astype(float) / np.sqrt(p)
    D1, D2, D3 = sign_diagonals
    return (H * D1[:, None, :]) @ (H * D2[:, None, :]) @ (H * D3[:, None, :])


@dataclass(frozen=True, eq=False, kw_only=True)
class StructuredOrthogonalFeatures(FourierFeatureMap, name="sorf"):
    r"""Structured orthogonal random features: blocks H D1 H D2 H D3 by a fast transform.

    Attributes
    ----------
    sign_diagonals : ndarray (3, n_blocks, p)
        Diagonals (+-1) of D1, D2, D3 for each block; p >= d a power of two.
    row_scales : ndarray (n_frequencies,)
        The norm r_l of each row times the mixture scale t_l.

    Notes
    -----
    Yu et al. (2016), Section 4: W_SORF = (sqrt(d) / sigma) H D1 H D2 H D3 with H the
    normalized Walsh-Hadamard matrix and D_i independent diagonal matrices of random signs;
    d is zero-padded to p = 2^k (here p >= 16 by default, ``MIN_BLOCK_SIZE``: small blocks
    have few distinct directions and a large bias). Block b (p frequencies) is

        W_b = diag(r * t) H D1 H D2 H D3,   H = hadamard(p) / sqrt(p),

    and the frequencies are the first d columns of the stacked blocks, first S rows
    (omega = ``omega``, kept explicitly for the length-scale gradient). ``phases`` never
    forms W: U W_b^T = U D3 H D2 H D1 H diag(r t) is three Walsh-Hadamard transforms
    (:func:`walsh_hadamard`), O(p log p) per block and input instead of O(p d) for the
    dense product.

    The rows of H D1 H D2 H D3 have unit norm exactly. ``radius="fixed"`` takes r = sqrt(p)
    as in the paper; those frequencies have norm sqrt(p) instead of a chi(p) law, which gives
    the biased "Bessel kernel" of an unscaled orthogonal matrix (Yu et al.'s ORF'; Demni &
    Kadri, arXiv:2310.07370). ``radius="chi"`` (default, our choice) draws r ~ chi(p) per row as ORF
    does, which makes the radial law exact. Neither variant is unbiased: the directions of
    the rows take finitely many values (2^(3p) sign patterns), not the uniform law on the
    sphere. Yu et al. bound the bias (of the fixed-radius variant) by O(|z| / sqrt(d)); the
    tests compute it exactly for p = 4 (-0.014 at |z| = 1 along a coordinate axis, chi
    radii; -0.040 with fixed radii); at p = 16 it is about -0.001.

    Supported: the Gaussian kernel, and Matern through the scalar Student-t scale t_l
    (module docstring), which multiplies a row after the transform. The product kernels need
    a scale per frequency *and* dimension, which would need one transform per frequency
    instead of one per block, so ``supports`` is False for Cauchy and Laplacian.
    """

    sign_diagonals: np.ndarray
    row_scales: np.ndarray

    STORED = {"sign_diagonals": Array((3, "blocks", "block_size"), ("sign",)),
              "row_scales": Array(("f",))}

    description = "structured orthogonal features sqrt(p) H D1 H D2 H D3 (fast Walsh-Hadamard)"
    reference = "Yu, Suresh, Choromanski, Holtmann-Rice & Kumar, NIPS 2016, Section 4"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Radial scale mixtures (Gaussian, Matern): one scalar scale t per frequency."""
        return kernel.scale_mixture == "radial"

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, radius: str = "chi",
              block_size: int | None = None):
        """Draw the sign diagonals, the row norms and the mixture scales.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian or Matern
        n_components : int
            Number of real columns: n_components // 2 cos/sin pairs, and for an odd count one
            more row with a single phase-shifted cosine.
        rng : numpy.random.Generator
            The only source of randomness.
        radius : {"chi", "fixed"}, default "chi"
            Row norms r_l ~ chi(p) (exact radial law) or r_l = sqrt(p) (Yu et al.).
        block_size : int, optional
            p, a power of two >= d; default max(16, the next power of two >= d).
        """
        X = check_matrix(X, "X")
        require_support(cls, kernel, "the product kernels need a scale per frequency and "
                        "dimension, which the fast transform cannot apply; use orf")
        kernel.check_n_dims(X.shape[1])
        if radius not in SORF_RADII:
            raise ValueError(f"radius must be one of {SORF_RADII}, got {radius!r}")
        n_frequencies, n_single = monte_carlo_frequencies(n_components)
        n_dims = X.shape[1]
        p = _check_block_size(block_size, n_dims)
        n_blocks = -(-n_frequencies // p)
        rng = as_generator(rng)
        sign_rng, radius_rng, scale_rng = rng.spawn(3)
        sign_diagonals = sign_rng.choice([-1.0, 1.0], size=(3, n_blocks, p))
        if radius == "chi":
            norms = np.sqrt(radius_rng.chisquare(p, size=n_frequencies))
        else:
            norms = np.full(n_frequencies, np.sqrt(p))
        row_scales = norms * kernel.sample_mixture_scales(n_frequencies, n_dims, scale_rng)[:, 0]
        rows = sorf_blocks(sign_diagonals).reshape(-1, p)[:n_frequencies, :n_dims]
        return cls(n_dims=n_dims, omega=row_scales[:, None] * rows,
                   frequency_weights=monte_carlo_weights(n_frequencies, n_single),
                   offset=data_centre(X), phase_shifts=draw_phase_shifts(rng, n_single),
                   sign_diagonals=sign_diagonals, row_scales=row_scales)

    def phases(self, U: np.ndarray) -> np.ndarray:
        """z = U omega^T by three fast Walsh-Hadamard transforms per block."""
        n_samples, n_dims = U.shape
        _, n_blocks, p = self.sign_diagonals.shape
        S = self.n_frequencies
        D1, D2, D3 = self.sign_diagonals[:, :, :, None].astype(U.dtype)   # (n_blocks, p, 1)
        # diag(r t) (H/sqrt p)(...)(H/sqrt p)(...)(H/sqrt p): the three 1/sqrt(p) go with r t
        scales = np.zeros(n_blocks * p, dtype=U.dtype)
        scales[:S] = self.row_scales / p**1.5
        scales = scales.reshape(n_blocks, p, 1)
        Z = np.empty((n_samples, S), dtype=U.dtype)
        chunk = max(1, CHUNK_ELEMENTS // (n_blocks * p))
        for start in range(0, n_samples, chunk):
            stop = min(start + chunk, n_samples)
            columns = np.zeros((1, p, stop - start), dtype=U.dtype)
            columns[0, :n_dims] = U[start:stop].T                      # zero padding to p
            Y = walsh_hadamard(columns * D3, axis=1)                   # (n_blocks, p, rows)
            Y *= D2
            Y = walsh_hadamard(Y, axis=1)
            Y *= D1
            Y = walsh_hadamard(Y, axis=1)
            Y *= scales
            Z[start:stop] = Y.reshape(n_blocks * p, -1)[:S].T         # row l = b p + i
        return Z
