"""Exceptions and warnings raised by scalegp."""


class NotPositiveDefiniteError(ValueError):
    """A matrix that must be positive definite is not, even after the largest jitter."""


class NumericalWarning(UserWarning):
    """A numerical safeguard changed the computation (e.g. jitter was added)."""


class BoundaryWarning(UserWarning):
    """An optimized hyperparameter sits on a bound of its box."""


class InvalidModelFileError(ValueError):
    """A model file is truncated, of another version, or not a scalegp model."""
