"""A kernel's exact side: k(X, Y), its diagonal, its gradients in the log-parameters and the
contractions of its input gradient (:class:`KernelValues`, a mixin of
:class:`scalegp.kernels.base.Kernel`; each kernel gives its correlation kappa and its
derivatives).
"""

from __future__ import annotations

import abc

import numpy as np

from .._validation import check_matrix


#: Dimensions from which :meth:`KernelValues.stacked` forms r^2 and its length-scale
#: contractions by batched GEMMs (``_stacked_by_gemm``) rather than from one (B, s, s)
#: array of differences per dimension (the Vecchia blocks of the UCI sets, d = 8-26: the
#: differences took 60 % of a likelihood evaluation on pol, benchmarks/results/vecchia-uci.md).
STACKED_GEMM_MIN_DIMS = 4


class KernelValues:
    """k(x, z) = s kappa(L^{-1} (x - z)) and its gradients, from the correlation of a kernel."""

    def _scaled_differences(self, X, Y):
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        return (X[:, None, :] - Y[None, :, :]) / self._length_scale

    #: True for a radial kernel kappa(u) = f(|u|^2) with f smooth at 0 (Gaussian, Matern 3/2
    #: and 5/2), which implements ``_profile``, ``_profile_log_scale_sum`` and
    #: ``_profile_input_factor`` of r^2: its matrices then come from r^2 by one GEMM
    #: (:meth:`_scaled_squared_distances`) instead of an (n, m, d) array of differences.
    smooth_in_r2 = False

    def _scaled_squared_distances(self, X, Y):
        """(r^2, A, B): r^2_ia = |a_i - b_a|^2 with a = (x - c) / l, b = (y - c) / l and c the
        mean of Y, as |a|^2 + |b|^2 - 2 a^T b (a GEMM), floored at 0.

        The shift c is the mean of Y, the reference set (training inputs, knots; X itself for
        k(X)), never of X: row i of r^2 is a function of x_i and Y alone, so a far row in a
        prediction batch X moves no other row's distances (a shift by the batch's mean did).

        Rounding: the expansion's terms carry relative errors of about (d + 4) eps, so
        |delta r^2| <= (d + 4) eps (|a| + |b|)^2 to first order. With beta = max_a |b_a| (the
        spread of Y about its mean, in length scales) and |a| <= |b| + r,

            |delta r^2| <= (d + 4) eps (8 beta^2 + 2 r^2):

        an absolute error set by the reference set's spread, not by the data's offset |x| / l
        (as without the shift), plus a relative one for far pairs. f smooth in r^2 at 0 turns
        an error delta of r^2 into delta f'(0), so the matrix is as accurate as from the
        differences (a kink at r = 0, Matern 1/2, would turn it into sqrt(delta): those
        kernels keep the differences). A row (or column) whose |a|^2 overflows, |a| > 1.3e154
        length scales, gets r^2 = inf, so k = 0 exactly, not inf - inf = NaN.
        """
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        shift = Y.mean(axis=0)
        with np.errstate(over="ignore", invalid="ignore"):   # far rows: handled below
            A = (X - shift) / self._length_scale
            B = A if Y is X else (Y - shift) / self._length_scale
            a2 = np.einsum("ij,ij->i", A, A)
            b2 = a2 if B is A else np.einsum("ij,ij->i", B, B)
            r2 = -2.0 * (A @ B.T)
            r2 += a2[:, None]
            r2 += b2[None, :]
        np.maximum(r2, 0.0, out=r2)
        r2[~np.isfinite(a2)] = np.inf
        r2[:, ~np.isfinite(b2)] = np.inf
        return r2, A, B

    def by_differences(self, X, Y=None) -> np.ndarray:
        """k(X, Y) from the coordinate differences (x_j - y_j) / l_j, one dimension at a time:
        accurate to rounding at any offset and free of any shift, in O(len(X) len(Y)) memory
        and O(len(X) len(Y) d) time without a GEMM. For the joint covariance of a prediction
        batch, where neither set is a fixed reference for the shift of :meth:`__call__`."""
        if not self.smooth_in_r2:
            return self(X, Y)                    # already from the differences
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        scale = np.broadcast_to(self._length_scale, (X.shape[1],))
        r2 = np.zeros((X.shape[0], Y.shape[0]))
        with np.errstate(over="ignore"):        # a far row: r^2 = inf, k = 0
            for j in range(X.shape[1]):
                u = np.subtract.outer(X[:, j], Y[:, j])
                u /= scale[j]
                r2 += np.square(u, out=u)
        return self._variance * self._profile(r2)

    def paired(self, X, Z) -> np.ndarray:
        """k(x_i, z_i) for each pair of matching rows of X and Z, shape (len(X),)."""
        scaled = ((np.asarray(X, dtype=np.float64) - np.asarray(Z, dtype=np.float64))[:, None, :]
                  / np.asarray(self.length_scale, dtype=np.float64))
        return self.variance * self._correlation(scaled)[:, 0]

    def __call__(self, X, Y=None) -> np.ndarray:
        """The kernel matrix k(X, Y), shape (len(X), len(Y)); Y defaults to X.

        Y is the reference set (training inputs, knots) and X the rows evaluated against it:
        row i depends on x_i and Y alone (:meth:`_scaled_squared_distances`), so pass a
        prediction batch as X. A row farther than float64 can measure gets k = 0."""
        if self.smooth_in_r2:
            return self._variance * self._profile(self._scaled_squared_distances(X, Y)[0])
        with np.errstate(over="ignore"):       # a row too far to measure: |u| = inf, k = 0
            return self._variance * self._correlation(self._scaled_differences(X, Y))

    def diag(self, X) -> np.ndarray:
        """k(x, x) for each row of X: the variance s for a stationary kernel."""
        X = check_matrix(X, "X")
        return np.full(X.shape[0], self._variance)

    def diag_gradient(self, X) -> np.ndarray:
        """d k(x, x) / d theta_i for each row, shape (n_params, n): a stationary kernel has
        k(x, x) = s, so 0 for the length scales and s for log s."""
        grad = np.zeros((self.n_params, check_matrix(X, "X").shape[0]))
        grad[-1] = self._variance
        return grad

    def gradient(self, X, Y=None) -> np.ndarray:
        """dK/d theta_i of k(X, Y) (Y defaults to X) for the log-parameters, shape
        (n_params, len(X), len(Y)); memory O(len(X) len(Y) d) (O(len(X) len(Y)) for a
        smooth radial kernel with one length scale)."""
        if self.smooth_in_r2 and not self.anisotropic:
            r2 = self._scaled_squared_distances(X, Y)[0]
            return np.stack([self._variance * self._profile_log_scale_sum(r2),
                             self._variance * self._profile(r2)])
        U = self._scaled_differences(X, Y)
        K = self._variance * self._correlation(U)
        if self.anisotropic:
            scale_grads = self._correlation_grad_log_scale(U)                # (n, n', d)
            grads = list(self._variance * np.moveaxis(scale_grads, -1, 0))
        else:
            grads = [self._variance * self._correlation_grad_log_scale_sum(U)]
        grads.append(K)
        return np.stack(grads)

    def stacked(self, X, *, eval_gradient: bool = False):
        """k(X_b, X_b) for each matrix X_b of a stack X (B, s, d): K of shape (B, s, s); with
        ``eval_gradient``, (K, inner) where inner(W), for W of K's shape, returns the
        gradient contractions

            g_p = sum_b <W_b, d k(X_b, X_b) / d theta_p>,  shape (n_params,),

        without forming the n_params derivative stacks (the Vecchia blocks need only these
        contractions: many small matrices at once, no Python step per matrix).

        From the per-dimension differences u_j = (x_j - z_j) / l_j. A kernel smooth in r^2
        keeps u_j^2 and g = kappa'(r) / r, so that with d kappa / d log l_j = -g u_j^2,
        d k / d log s = k:

            g_{l_j} = -s <W o g, u_j^2>  (one length scale: -s <W o g, r^2>),  g_s = <W, K>;

        other kernels keep d kappa / d log l_j from the differences. ``inner`` holds
        O(B s^2 d) memory until it is dropped; W is overwritten."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 3:
            raise ValueError(f"X must be a stack of shape (B, s, d), got shape {X.shape}")
        self.check_n_dims(X.shape[2])
        V = X / self._length_scale
        if not self.smooth_in_r2:
            U = V[:, :, None, :] - V[:, None, :, :]
            K = self._variance * self._correlation(U)
            if not eval_gradient:
                return K
            if self.anisotropic:
                grads = np.moveaxis(self._correlation_grad_log_scale(U), -1, 0)
            else:
                grads = self._correlation_grad_log_scale_sum(U)[None]
            del U

            def inner(W):
                flat = W.reshape(-1)
                return np.array([self._variance * (g.reshape(-1) @ flat) for g in grads]
                                + [K.reshape(-1) @ flat])

            return K, inner
        if V.shape[2] >= STACKED_GEMM_MIN_DIMS:
            return self._stacked_by_gemm(V, eval_gradient)
        squares = []
        for j in range(V.shape[2]):
            u = V[:, :, None, j] - V[:, None, :, j]
            squares.append(np.square(u, out=u))
        r2 = squares[0] if len(squares) == 1 else np.add(squares[0], squares[1])
        for square in squares[2:]:
            r2 += square
        K, factor = self._stacked_values(r2, eval_gradient)
        if not eval_gradient:
            return K
        if not self.anisotropic:
            squares = [r2]
        elif len(squares) == 1:
            squares = [r2]

        def inner(W):
            value = (K.reshape(-1) @ W.reshape(-1))
            F = np.multiply(W, factor, out=W).reshape(-1)
            return np.array([-self._variance * (F @ square.reshape(-1)) for square in squares]
                            + [value])

        return K, inner

    def _stacked_values(self, r2, eval_gradient: bool):
        """(K, g) of :meth:`stacked` from the squared distances r2 (B, s, s): K = s k(r2)
        and, with ``eval_gradient``, the input factor g of the length-scale gradients
        (:meth:`_profile_and_input_factor`; None without)."""
        if not eval_gradient:
            K = self._profile(r2)
            K *= self._variance
            return K, None
        kappa, factor = self._profile_and_input_factor(r2)
        return np.multiply(kappa, self._variance, out=kappa), factor

    def _stacked_by_gemm(self, V, eval_gradient: bool):
        """:meth:`stacked` of a kernel smooth in r^2 in d >= ``STACKED_GEMM_MIN_DIMS``
        dimensions, from the scaled inputs V (B, s, d) by batched GEMMs instead of d arrays
        of (B, s, s) differences: with a = v - mean_b(v) per matrix (the shift and the
        rounding of :meth:`_scaled_squared_distances`),

            r^2_ac = |a_a|^2 + |a_c|^2 - 2 a_a^T a_c   (floored at 0, 0 on the diagonal),

        and the length-scale contractions, with F = W o g,

            sum_ac F_ac (a_aj - a_cj)^2 = sum_a a_aj^2 (sum_c F_ac + sum_c F_ca)
                                          - 2 sum_a a_aj (F a)_aj,

        O(B s^2 d) flops in GEMMs and O(B s d) memory besides K (the differences: O(B s^2 d)
        of each)."""
        A = V - V.mean(axis=1, keepdims=True)
        a2 = np.einsum("bsj,bsj->bs", A, A)
        r2 = np.matmul(A, np.swapaxes(A, 1, 2))
        r2 *= -2.0
        r2 += a2[:, :, None]
        r2 += a2[:, None, :]
        np.maximum(r2, 0.0, out=r2)
        diagonal = np.arange(V.shape[1])
        r2[:, diagonal, diagonal] = 0.0
        K, factor = self._stacked_values(r2, eval_gradient)
        if not eval_gradient:
            return K
        anisotropic = self.anisotropic

        def inner(W):
            value = (K.reshape(-1) @ W.reshape(-1))
            F = np.multiply(W, factor, out=W)
            if not anisotropic:
                scales = [F.reshape(-1) @ r2.reshape(-1)]
            else:
                edge = F.sum(axis=2) + F.sum(axis=1)                     # (B, s)
                scales = (np.einsum("bs,bsj,bsj->j", edge, A, A)
                          - 2.0 * np.einsum("bsj,bsj->j", A, np.matmul(F, A)))
            return np.concatenate([-self._variance * np.asarray(scales), [value]])

        return K, inner

    def stacked_gradient(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(K, dK) for a stack X (B, s, d): K as :meth:`stacked`, and d k(X_b, X_b) /
        d theta_p of each, shape (n_params, B, s, s), whose last slice is K itself (what
        the Fisher information of the Vecchia blocks needs). Memory O(n_params B s^2)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 3:
            raise ValueError(f"X must be a stack of shape (B, s, d), got shape {X.shape}")
        self.check_n_dims(X.shape[2])
        V = X / self._length_scale
        U = V[:, :, None, :] - V[:, None, :, :]
        n_scales = U.shape[-1] if self.anisotropic else 1
        dK = np.empty((n_scales + 1,) + U.shape[:3])
        if self.smooth_in_r2:
            squares = np.square(U)
            r2 = squares.sum(axis=-1)
            kappa, factor = self._profile_and_input_factor(r2)
            factor *= -self._variance
            for j in range(n_scales):
                np.multiply(factor, squares[..., j] if self.anisotropic else r2, out=dK[j])
        else:
            kappa = self._correlation(U)
            if self.anisotropic:
                grads = self._correlation_grad_log_scale(U)
                for j in range(n_scales):
                    np.multiply(grads[..., j], self._variance, out=dK[j])
            else:
                np.multiply(self._correlation_grad_log_scale_sum(U), self._variance, out=dK[0])
        np.multiply(kappa, self._variance, out=dK[-1])
        return dK[-1], dK

    def input_gradient_contraction(self, X, Z, E) -> np.ndarray:
        """sum_i E_ia d k(x_i, z_a) / d z_a for each row z_a of Z, shape (len(Z), d).

        With u = (x - z) / l, d k(x, z) / d z_j = -(s / l_j) d kappa / d u_j, so the result is
        -(s / l) o sum_i E_ia grad kappa(u_ia): the chain rule of a function of k(X, Z) in the
        knots (docs/nystrom.md, "Learned knots"). Memory O(len(X) len(Z) d), as for the kernel
        matrix itself. Kernels whose correlation is not differentiable at u = 0 raise
        NotImplementedError.
        """
        E = np.asarray(E, dtype=float)
        if self.smooth_in_r2:
            # grad kappa(u_ia) = g(r^2_ia) u_ia with u_ia = a_i - b_a, so the sum over i is
            # F^T A - (F^T 1) o B with F = E o g(r^2): two GEMMs, no (n, m, d) array
            r2, A, B = self._scaled_squared_distances(X, Z)
            if E.shape != r2.shape:
                raise ValueError(f"E must have shape {r2.shape}, got {E.shape}")
            F = E * self._profile_input_factor(r2)
            return -(self._variance / self._length_scale) * (F.T @ A - F.sum(axis=0)[:, None] * B)
        U = self._scaled_differences(X, Z)
        if E.shape != U.shape[:2]:
            raise ValueError(f"E must have shape {U.shape[:2]}, got {E.shape}")
        grad = self._correlation_grad_input(U)                              # (n, m, d)
        return -(self._variance / self._length_scale) * np.einsum("ia,iaj->aj", E, grad)

    def gradient_inner_and_input_contraction(self, X, Z, E, *, input_contraction=True):
        """(g, c) with g_j = <E, dk(X, Z)/d theta_j> for each log-parameter, shape (n_params,),
        and c = :meth:`input_gradient_contraction` (X, Z, E) (None with
        ``input_contraction=False``): what a Nystrom gradient pass needs of a chunk
        (:meth:`scalegp.features.nystrom.NystromAtTheta.own_gradient`).

        For a smooth radial kernel both come from one r^2 and one evaluation of kappa and
        g = kappa'(r) / r (:meth:`_profile_and_input_factor`): with d kappa / d log l_j =
        -g u_j^2 (u = a_i - b_a, the scaled and shifted rows of
        :meth:`_scaled_squared_distances`), d kappa / d log l = -g r^2 for one shared length
        scale, and d k / d log s = k, with F = E o g(r^2)::

            g_{l_j} = -s sum_ia F_ia (a_ij - b_aj)^2
                    = -s [sum_i a_ij^2 (F 1)_i + sum_a b_aj^2 (F^T 1)_a - 2 sum_i a_ij (F B)_ij]
            g_l = -s <F, r^2>  (one length scale),     g_s = s <E, kappa(r^2)>

        This is O(len(X) len(Z) d) flops in one GEMM and O(len(X) len(Z)) memory, where
        :meth:`gradient` forms n_params matrices from an (len(X), len(Z), d) array of
        differences (the pilot exact GP of ``auto`` on pol, d = 26: 80 % of its time).
        The rounding is that of :meth:`_scaled_squared_distances` (the same expansion).
        Other kernels form :meth:`gradient` and the contraction separately.
        """
        if not self.smooth_in_r2:
            inner = np.array([np.vdot(E, dK_j) for dK_j in self.gradient(X, Z)])
            return inner, (self.input_gradient_contraction(X, Z, E) if input_contraction
                           else None)
        E = np.asarray(E, dtype=float)
        r2, A, B = self._scaled_squared_distances(X, Z)
        if E.shape != r2.shape:
            raise ValueError(f"E must have shape {r2.shape}, got {E.shape}")
        profile, factor = self._profile_and_input_factor(r2)
        F = np.multiply(E, factor, out=factor)
        inner = self._variance * np.append(-self._scale_contraction(F, r2, A, B),
                                           np.vdot(E, profile))
        if not input_contraction:
            return inner, None
        cross = -(self._variance / self._length_scale) * (F.T @ A - F.sum(axis=0)[:, None] * B)
        return inner, cross

    def _scale_contraction(self, F, r2, A, B) -> np.ndarray:
        """sum_ia F_ia (a_ij - b_aj)^2 for each length scale j by one GEMM (the formula of
        :meth:`gradient_inner_and_input_contraction`), or <F, r^2> for one shared length
        scale; A, B and r^2 from :meth:`_scaled_squared_distances`."""
        if not self.anisotropic:
            return np.array([np.vdot(F, r2)])
        return (np.square(A).T @ F.sum(axis=1) + np.square(B).T @ F.sum(axis=0)
                - 2.0 * np.einsum("ij,ij->j", A, F @ B))

    def gram_and_gradient_inner(self, X):
        """(k(X, X), inner) with inner(W) = <W, d k(X, X) / d theta_p> for each
        log-parameter, shape (n_params,): what the exact likelihood's gradient needs. For a
        kernel smooth in r^2 both come from one r^2 and one evaluation of kappa and
        g = kappa'(r) / r, as in :meth:`gradient_inner_and_input_contraction` (the Gram
        matrix is not formed twice); other kernels form :meth:`gradient` when inner is
        called. The matrix returned is the caller's to modify (inner keeps its own)."""
        if not self.smooth_in_r2:
            return self(X), lambda W: np.array([np.vdot(W, dK) for dK in self.gradient(X)])
        r2, A, _ = self._scaled_squared_distances(X, None)
        kappa, factor = self._profile_and_input_factor(r2)

        def inner(W):
            return self._variance * np.append(
                -self._scale_contraction(W * factor, r2, A, A), np.vdot(W, kappa))

        return self._variance * kappa, inner

    def _profile_and_input_factor(self, r2) -> tuple[np.ndarray, np.ndarray]:
        """(kappa(r^2), kappa'(r) / r) of a kernel smooth in r^2; kernels override it to share
        one exponential."""
        return self._profile(r2), self._profile_input_factor(r2)

    def _correlation_grad_input(self, U: np.ndarray) -> np.ndarray:
        """d kappa / d u_j, shape (..., d), for the stationary kernels differentiable at
        u = 0 (Gaussian, Matern 3/2 and 5/2, Cauchy)."""
        raise NotImplementedError(
            f"the input gradient (learned knots) is implemented for the gaussian, matern32, "
            f"matern52 and cauchy kernels, not for {self!r} (matern12 and laplacian have a "
            "kink at x = z)")

    @abc.abstractmethod
    def _correlation(self, U: np.ndarray) -> np.ndarray:
        """kappa of the scaled differences U = (x - z) / l, shape (..., d) -> (...)."""

    @abc.abstractmethod
    def _correlation_grad_log_scale(self, U: np.ndarray) -> np.ndarray:
        """d kappa / d log l_j for each dimension j, shape (..., d)."""

    def _correlation_grad_log_scale_sum(self, U: np.ndarray) -> np.ndarray:
        """sum_j d kappa / d log l_j, shape (...): the derivative in one shared length scale.
        A radial kernel overrides it with -kappa'(r) r (no (..., d) temporaries)."""
        return self._correlation_grad_log_scale(U).sum(axis=-1)

