"""Exceptions and warnings raised by scalegp."""

from sklearn.exceptions import ConvergenceWarning as _SklearnConvergenceWarning


class NotPositiveDefiniteError(ValueError):
    """A matrix that must be positive definite is not, even after the largest jitter."""


class NumericalWarning(UserWarning):
    """A numerical safeguard changed the computation (e.g. jitter was added)."""


class BoundaryWarning(UserWarning):
    """An optimized hyperparameter sits on a bound of its box."""


class InvalidModelFileError(ValueError):
    """A model file is truncated, of another version, or not a scalegp model."""


class UnsafeOutputError(ValueError):
    """An output path that writing could destroy something through (a device, FIFO, socket,
    folder or symbolic link, an input of the same command, a read-only file), or whose folder
    or suffix is wrong; see :mod:`scalegp._output`."""


class ConvergenceWarning(_SklearnConvergenceWarning):
    """The hyperparameter optimizer stopped without meeting its convergence test.

    A subclass of scikit-learn's ``ConvergenceWarning``, so scikit-learn's filters apply.
    """


class FitQualityWarning(UserWarning):
    """A fitted model explains its training targets worse than a noise-only model."""


class NonFiniteResultError(ValueError):
    """A fit or prediction produced a NaN or infinite value (e.g. float64 overflow).

    Raised by a prediction, it carries ``rows``, the 0-based test rows affected, and
    ``reason``, the message without the row, so that a caller which knows where the rows came
    from (the command line: a file's data rows) can name them its own way; both are None
    otherwise."""

    def __init__(self, message, *, rows=None, reason=None):
        super().__init__(message)
        self.rows, self.reason = rows, reason


class InsufficientMemoryError(ValueError, MemoryError):
    """A parameter (e.g. ``n_components``) needs more memory than the machine has available;
    raised before any work, with the estimate (see :mod:`scalegp._memory`)."""


class ApproximationWarning(UserWarning):
    """A feature map cannot resolve the kernel in this setting (a measured kernel error, or a
    truncation remainder, above the stated limit): its predictions may be far from the exact
    GP's (see :mod:`scalegp.local.resolution`)."""


class TimeBudgetExceeded(RuntimeError):
    """Learning passed the deadline set by :func:`scalegp.inference.optimize.deadline`
    (``approximation="auto"`` abandons such a fit rather than report it)."""
