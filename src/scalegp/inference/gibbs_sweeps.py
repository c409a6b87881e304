"""The two ways of a Gibbs sweep's work (docs/gibbs.md, "Cost model"): from the m x m statistics
of each atom (:class:`StatisticsBackend`, homoscedastic, collapsed or not) or from the rows with
the FITC-style diagonal (:class:`RowsBackend`, features kept or recomputed per atom).
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
from threadpoolctl import threadpool_limits

from .. import linalg
from .._memory import available_bytes, check_memory
from ..data.base import ArraySource
from ..engine.statistics import BasisStatistics, accumulate_statistics
from ..features.base import FixedBasisFeatureMap
from .gibbs_model import (DIAG_FLOOR, FEATURE_CACHE_BYTES, AtomMaps, GammaPrior, _State,
                          _atom_map, unit_kernel)


#: Matrices up to this order are factorized, and a statistics sweep's products run, on one
#: BLAS thread: eigh of a 256 x 256 matrix took 9 ms on one thread and 15 to 250 ms on two
#: beside other jobs (a 2-core machine; threads waiting for busy cores), and a sweep's
#: products are too small to share.
ONE_THREAD_ORDER = 512


def one_blas_thread(order: int):
    """A context running BLAS and LAPACK on one thread for matrices of order up to
    ``ONE_THREAD_ORDER`` (unchanged above it)."""
    return (threadpool_limits(limits=1, user_api="blas") if order <= ONE_THREAD_ORDER
            else contextlib.nullcontext())


class StatisticsBackend:
    """Weight-space conditionals from the m x m statistics of every grid point (no diagonal).

    With G_h = U_h diag(lam_h) U_h^T and z_h = U_h^T b_h (Eq. G5-G8 of docs/gibbs.md)::

        w | y, tau, theta2, h ~ N(U (tau lam + theta2)^{-1} tau z, U (tau lam + theta2)^{-1} U^T)
        tau | y, w, h ~ Ga(a1 + n/2, b1 + RSS_h(w)/2),  RSS_h(w) = y^T y - 2 z^T v + lam^T v^2
        theta2 | w ~ Ga(a2 + m/2, b2 + |w|^2/2),        v = U_h^T w
        Pr(h | y, w, tau) ∝ exp(-tau RSS_h(w) / 2),
        collapsed: log Pr(h | y, tau, theta2) = -1/2 sum_l [log(1 + tau lam_l / theta2)
                                                 - tau^2 z_l^2 / (tau lam_l + theta2)] + const.
    """

    cost_model = "statistics"

    def __init__(self, atoms: AtomMaps, kernel, grid, X, y, progress=None):
        m, t = atoms.n_components, grid.size
        check_memory(m, n_matrices=t + 6, what=f"the Gibbs statistics of {t} grid points")
        source = ArraySource(X, y)
        # one fixed basis shared by the atoms: its statistics from one pass, rescaled per atom
        basis = (BasisStatistics.accumulate(atoms[0], X, y)
                 if atoms.shared and isinstance(atoms[0], FixedBasisFeatureMap) else None)
        # an atom of rank m_h < m: G_h is padded by an m - m_h block of zeros, whose
        # eigenvectors are the unit vectors beyond m_h (eigenvalue 0, z = 0)
        self.eigenvalues = np.zeros((t, m))
        self.eigenvectors = np.zeros((t, m, m))
        self.rotated_projection = np.zeros((t, m))
        for h in range(t):
            if basis is not None:
                stats = basis.at(atoms[h], unit_kernel(kernel, grid[h]))
            else:
                stats = accumulate_statistics(_atom_map(atoms, kernel, grid, h)[0], source)
            with one_blas_thread(m):
                lam, U = linalg.symmetric_eigen(stats.gram, name="Phi^T Phi")
            z = U.T @ stats.projection
            rank = lam.size
            # Eigenvalues within the rounding of eigh (m eps lam_max) are 0, and so are their
            # z_l: exact arithmetic has z_l^2 <= lam_l y^T y (Cauchy-Schwarz), which rounding
            # breaks there, and a z_l without its lam_l drives the weights' mean tau z_l /
            # (tau lam_l + theta2) and theta2 to 0 without bound (docs/gibbs.md,
            # "Conditionals without the diagonal").
            null = lam <= rank * np.finfo(float).eps * max(lam.max(), 0.0)
            self.eigenvalues[h, :rank] = np.where(null, 0.0, lam)
            self.eigenvectors[h, :rank, :rank] = U
            self.eigenvectors[h, range(rank, m), range(rank, m)] = 1.0
            self.rotated_projection[h, :rank] = np.where(null, 0.0, z)
            self.y_norm2, self.n_samples = stats.y_norm2, stats.n_samples
            if progress is not None:
                progress(h + 1)
        self.n_components = m
        self.n_floored = 0

    @functools.cached_property
    def _nonzero(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(order, lam, z): per grid point the indices of its non-zero directions first
        (in eigh's order), r = max_h #{lam_{h,l} > 0} <= min(n, m) of them, and their lam
        and z, shape (t, r). A grid point with fewer pads with null directions (lam = z = 0).

        Every sum over l in RSS_h and in the collapsed log probabilities has a term that
        vanishes where lam_l = 0 (then z_l = 0 too), so these r columns give the same sums:
        O(t r) and O(t m r) work per sweep instead of O(t m) and O(t m^2)."""
        nonzero = self.eigenvalues > 0
        r = max(int(nonzero.sum(axis=1).max()), 1)
        order = np.argsort(~nonzero, axis=1, kind="stable")[:, :r]
        rows = np.arange(order.shape[0])[:, None]
        return order, self.eigenvalues[rows, order], self.rotated_projection[rows, order]

    @functools.cached_property
    def _rss_vectors(self) -> np.ndarray:
        """The eigenvectors of the non-zero directions as one C-contiguous (m, t r) array V,
        so that every v_h = U_h^T w of a sweep is one BLAS product w^T V."""
        order = self._nonzero[0]
        t, r = order.shape
        m = self.eigenvectors.shape[1]
        check_memory(m, n_matrices=math.ceil(t * r / m), what="the eigenvectors of the "
                     "uncollapsed theta1 step", advice="use collapsed=True (it needs none)")
        gathered = np.take_along_axis(self.eigenvectors, order[:, None, :], axis=2)  # (t, m, r)
        return np.ascontiguousarray(gathered.transpose(1, 0, 2)).reshape(-1, t * r)

    def initial_latent(self) -> np.ndarray:
        return np.zeros(self.n_components)

    def draw_latent(self, state: _State, rng) -> None:
        lam, U = self.eigenvalues[state.index], self.eigenvectors[state.index]
        precision = state.tau * lam + state.theta2
        rotated = (state.tau * self.rotated_projection[state.index] / precision
                   + rng.standard_normal(lam.size) / np.sqrt(precision))
        state.latent = U @ rotated

    def residual_sum_of_squares(self, w: np.ndarray) -> np.ndarray:
        """RSS_h(w) = |y - Psi_h w|^2 for every grid point, shape (t,)."""
        _, lam, z = self._nonzero
        v = (w @ self._rss_vectors).reshape(lam.shape)
        rss = self.y_norm2 - 2 * np.sum(z * v, axis=1) + np.sum(lam * v * v, axis=1)
        return np.maximum(rss, 0.0)

    def tau_conditional(self, state: _State, prior: GammaPrior) -> GammaPrior:
        v = self.eigenvectors[state.index].T @ state.latent
        rss = (self.y_norm2 - 2 * self.rotated_projection[state.index] @ v
               + self.eigenvalues[state.index] @ (v * v))
        return prior.updated(0.5 * self.n_samples, 0.5 * max(rss, 0.0))

    def theta2_conditional(self, state: _State, prior: GammaPrior) -> GammaPrior:
        return prior.updated(0.5 * self.n_components, 0.5 * float(state.latent @ state.latent))

    def theta1_log_probs(self, state: _State) -> np.ndarray:
        return -0.5 * state.tau * self.residual_sum_of_squares(state.latent)

    def collapsed_theta1_log_probs(self, tau: float, theta2: float) -> np.ndarray:
        _, lam, z = self._nonzero
        return -0.5 * (np.log1p(tau * lam / theta2).sum(axis=1)
                       - tau**2 * (z * z / (tau * lam + theta2)).sum(axis=1))

    def weights(self, state: _State, rng) -> np.ndarray:
        return state.latent


# ============================================================================ diagonal
class RowsBackend:
    """Function-space conditionals with the FITC-style diagonal (Eq. G9-G11 of docs/gibbs.md).

    Q_h = Psi_h Psi_h^T + C_h with C_h = diag(c_h) (unit variance), g = f(X) ~ N(0, Q_h /
    theta2). Per grid point, independent of tau and theta2: c_h (floored), the Cholesky
    factor L_h of I + Psi_h^T C_h^{-1} Psi_h and log|Q_h| = sum log c_h + 2 sum log diag L_h::

        g | y, tau, theta2, h: w ~ N(A^{-1} Psi^T R y, A^{-1}), A = theta2 I + Psi^T R Psi,
            R = diag(1 / (c / theta2 + 1 / tau)); u_i | w ~ N(tau r_i / (tau + theta2 / c_i),
            1 / (tau + theta2 / c_i)) with r = y - Psi w; g = Psi w + u
        tau | y, g ~ Ga(a1 + n/2, b1 + |y - g|^2 / 2)
        theta2 | g, h ~ Ga(a2 + n/2, b2 + q_h(g) / 2),  q_h(g) = g^T Q_h^{-1} g
        Pr(h | g, theta2) ∝ |Q_h|^{-1/2} exp(-theta2 q_h(g) / 2)
        collapsed: Pr(h | y, tau, theta2) ∝ N(y; 0, Q_h / theta2 + I / tau).

    q_h(g) = |w*|^2 + sum_i (g_i - psi_i^T w*)^2 / c_i with w* = L^{-T} L^{-1} Psi^T C^{-1} g
    (the minimum over w of |w|^2 + (g - Psi w)^T C^{-1} (g - Psi w)): a sum of non-negative
    terms, which stays accurate where c is at its floor.
    """

    def __init__(self, atoms: AtomMaps, kernel, grid, X, y, progress=None,
                 feature_cache_bytes=FEATURE_CACHE_BYTES):
        n, m, t = X.shape[0], atoms.n_components, grid.size
        check_memory(m, n_matrices=t + 6, what=f"the Gibbs factors of {t} grid points")
        self.atoms, self.kernel, self.grid, self.X, self.y = atoms, kernel, grid, X, y
        self.n_samples, self.n_components = n, m
        self.ranks = atoms.ranks
        available = available_bytes()
        budget = feature_cache_bytes if available is None else min(feature_cache_bytes,
                                                                   available // 4)
        self.cached = n * int(self.ranks.sum()) * 8 <= budget
        self.cost_model = "rows-cached" if self.cached else "rows-recomputed"
        self._features = [] if self.cached else None
        self.diagonals = np.empty((t, n))
        self.factors = [None] * t
        self.log_det = np.empty(t)
        self.n_floored = 0
        for h in range(t):
            Psi, c, floored = self._features_and_diagonal(h)
            self.n_floored += floored
            scaled = Psi / np.sqrt(c)[:, None]
            L = linalg.cholesky(np.eye(Psi.shape[1]) + scaled.T @ scaled,
                                name="I + Psi^T C^-1 Psi")[0]
            self.diagonals[h], self.factors[h] = c, L
            self.log_det[h] = np.log(c).sum() + 2 * np.log(np.diag(L)).sum()
            if self.cached:
                self._features.append(Psi)
            if progress is not None:
                progress(h + 1)

    def _features_and_diagonal(self, h: int):
        fmap, kernel_h = _atom_map(self.atoms, self.kernel, self.grid, h)
        Psi = np.asarray(fmap.features(self.X), dtype=np.float64)
        prior = kernel_h.diag(self.X)
        raw = prior - np.einsum("ij,ij->i", Psi, Psi)
        floor = DIAG_FLOOR * prior
        return Psi, np.maximum(raw, floor), int(np.sum(raw < floor))

    def features(self, h: int) -> np.ndarray:
        return self._features[h] if self.cached else self._features_and_diagonal(h)[0]

    def initial_latent(self) -> np.ndarray:
        return np.zeros(self.n_samples)

    def draw_latent(self, state: _State, rng) -> None:
        Psi, c = self.features(state.index), self.diagonals[state.index]
        tau, theta2 = state.tau, state.theta2
        r = 1.0 / (c / theta2 + 1.0 / tau)
        A = theta2 * np.eye(Psi.shape[1]) + (Psi * r[:, None]).T @ Psi
        L = linalg.cholesky(A, name="theta2 I + Psi^T R Psi")[0]
        mean = linalg.cho_solve(L, Psi.T @ (r * self.y))
        w = mean + linalg.solve_lower(L, rng.standard_normal(Psi.shape[1]),
                                       transpose=True)
        fitted = Psi @ w
        precision = tau + theta2 / c
        u = tau * (self.y - fitted) / precision + rng.standard_normal(c.size) / np.sqrt(precision)
        state.latent = fitted + u

    def _best_weights(self, h: int, g: np.ndarray, Psi: np.ndarray) -> np.ndarray:
        """w* = (I + Psi^T C^{-1} Psi)^{-1} Psi^T C^{-1} g."""
        return linalg.cho_solve(self.factors[h], Psi.T @ (g / self.diagonals[h]))

    def quadratic_form(self, h: int, g: np.ndarray, Psi: np.ndarray | None = None) -> float:
        """q_h(g) = g^T Q_h^{-1} g (Eq. G10)."""
        Psi = self.features(h) if Psi is None else Psi
        w = self._best_weights(h, g, Psi)
        residual = g - Psi @ w
        return float(w @ w + residual @ (residual / self.diagonals[h]))

    def tau_conditional(self, state: _State, prior: GammaPrior) -> GammaPrior:
        residual = self.y - state.latent
        return prior.updated(0.5 * self.n_samples, 0.5 * float(residual @ residual))

    def theta2_conditional(self, state: _State, prior: GammaPrior) -> GammaPrior:
        return prior.updated(0.5 * self.n_samples,
                             0.5 * self.quadratic_form(state.index, state.latent))

    def theta1_log_probs(self, state: _State) -> np.ndarray:
        q = np.array([self.quadratic_form(h, state.latent) for h in range(self.grid.size)])
        return -0.5 * self.log_det - 0.5 * state.theta2 * q

    def collapsed_theta1_log_probs(self, tau: float, theta2: float) -> np.ndarray:
        out = np.empty(self.grid.size)
        for h in range(self.grid.size):
            Psi = self.features(h)
            m = Psi.shape[1]
            noise = self.diagonals[h] / theta2 + 1.0 / tau           # Lambda
            scaled = Psi / np.sqrt(noise)[:, None]
            L = linalg.cholesky(theta2 * np.eye(m) + scaled.T @ scaled,
                                name="theta2 I + Psi^T Lambda^-1 Psi")[0]
            c = linalg.solve_lower(L, scaled.T @ (self.y / np.sqrt(noise)))
            log_det = np.log(noise).sum() + 2 * np.log(np.diag(L)).sum() - m * math.log(theta2)
            out[h] = -0.5 * (self.y @ (self.y / noise) - c @ c + log_det)
        return out

    def weights(self, state: _State, rng) -> np.ndarray:
        """A draw of w | g, theta2, h ~ N(w*, (theta2 L L^T)^{-1}) for the stored samples
        (at an atom of rank m_h < m, the weights beyond m_h are prior draws)."""
        h = state.index
        Psi = self.features(h)
        rank = Psi.shape[1]
        mean = self._best_weights(h, state.latent, Psi)
        noise = linalg.solve_lower(self.factors[h], rng.standard_normal(rank), transpose=True)
        if rank == self.n_components:
            return mean + noise / math.sqrt(state.theta2)
        w = rng.standard_normal(self.n_components) / math.sqrt(state.theta2)
        w[:rank] = mean + noise / math.sqrt(state.theta2)
        return w
