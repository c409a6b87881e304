"""The only place where user input is coerced and checked.

Every message names the parameter, what was expected and what was received.
"""

from __future__ import annotations

import numbers

import numpy as np

SUPPORTED_DTYPES = (np.float64, np.float32)


def as_generator(seed) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from ``None``, an int, a SeedSequence or a Generator."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(seed, numbers.Integral) and int(seed) < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {seed!r}")
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.RandomState):
        return np.random.default_rng(seed.randint(0, 2**31 - 1))
    raise TypeError(
        "random_state must be None, a non-negative int, a numpy SeedSequence or Generator, "
        f"got {type(seed).__name__}"
    )


def check_dtype(dtype, name: str = "dtype") -> np.dtype:
    """Accept float64 (default) or float32."""
    resolved = np.dtype(np.float64 if dtype is None else dtype)
    if resolved.type not in SUPPORTED_DTYPES:
        raise ValueError(f"{name} must be float64 or float32, got {resolved}")
    return resolved


def _as_float_array(values, name: str, dtype) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype.kind in "OSUV":
        raise TypeError(
            f"{name} must contain numbers only, got an array of dtype {values.dtype} "
            "(non-numeric column?)"
        )
    try:
        array = np.asarray(values, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must contain numbers only ({error})") from None
    return array


def check_matrix(X, name: str = "X", *, dtype=np.float64, n_dims: int | None = None,
                 min_samples: int = 1, first_row: int = 0) -> np.ndarray:
    """Return X as a finite C-contiguous 2-D float array of shape (n_samples, n_dims).

    A non-finite entry is reported at row ``first_row + i`` (the global row of a chunk).
    """
    if X is None:
        raise ValueError(f"{name} must be a 2-D array of shape (n_samples, n_dims), got None")
    dtype = check_dtype(dtype)
    array = _as_float_array(X, name, dtype)
    if array.ndim == 1:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_dims), got a 1-D array of shape "
            f"{array.shape}; reshape with X.reshape(-1, 1) for a single input dimension"
        )
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_dims), got shape {array.shape}"
        )
    if array.shape[0] < min_samples:
        raise ValueError(
            f"{name} must have at least {min_samples} sample(s), got {array.shape[0]} "
            f"(shape {array.shape})"
        )
    if array.shape[1] == 0:
        raise ValueError(f"{name} must have at least one column, got shape {array.shape}")
    if n_dims is not None and array.shape[1] != n_dims:
        raise ValueError(
            f"{name} must have {n_dims} column(s) (the number of input dimensions), "
            f"got {array.shape[1]}"
        )
    _check_finite(array, name, first_row)
    return np.ascontiguousarray(array)


def check_vector(y, name: str = "y", *, n_samples: int | None = None,
                 dtype=np.float64, first_row: int = 0) -> np.ndarray:
    """Return y as a finite 1-D float array (a column vector of shape (n, 1) is accepted).

    A non-finite entry is reported at row ``first_row + i`` (the global row of a chunk).
    """
    if y is None:
        raise ValueError(f"{name} must be a 1-D array, got None")
    array = _as_float_array(y, name, check_dtype(dtype))
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of shape (n_samples,), got shape {array.shape}")
    if array.shape[0] == 0:
        raise ValueError(f"{name} must have at least one sample, got an empty array")
    if n_samples is not None and array.shape[0] != n_samples:
        raise ValueError(
            f"{name} must have {n_samples} entries (one per row of X), got {array.shape[0]}"
        )
    _check_finite(array, name, first_row)
    return np.ascontiguousarray(array)


def check_noise_variances(values, n_samples: int,
                          name: str = "sample_noise_variance") -> np.ndarray:
    """Known per-row noise variances: finite, >= 0, one per row (the error names the first
    negative row)."""
    values = check_vector(values, name, n_samples=n_samples)
    if np.any(values < 0):
        row = int(np.flatnonzero(values < 0)[0])
        raise ValueError(f"{name} must be >= 0, got {values[row]!r} at row {row}")
    return values


def _check_finite(array: np.ndarray, name: str, first_row: int) -> None:
    if not np.all(np.isfinite(array)):
        bad = np.argwhere(~np.isfinite(array))[0]
        where = f"row {first_row + bad[0]}" + (f", column {bad[1]}" if array.ndim == 2 else "")
        raise ValueError(f"{name} must be finite (no NaN or inf), got a non-finite value at {where}")


def check_positive_scalar(value, name: str) -> float:
    """A finite, strictly positive real number."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.ndarray)):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    scalar = np.asarray(value, dtype=float)
    if scalar.ndim != 0:
        raise ValueError(f"{name} must be a scalar, got an array of shape {scalar.shape}")
    scalar = float(scalar)
    if not np.isfinite(scalar) or scalar <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {scalar!r}")
    return scalar


def check_positive_vector(value, name: str) -> np.ndarray:
    """A scalar or 1-D array of finite, strictly positive numbers (returned as 1-D)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a positive number or array, got {value!r}")
    array = _as_float_array(value, name, np.float64)
    array = np.atleast_1d(array)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a positive scalar or 1-D array, got shape {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ValueError(f"{name} must contain finite positive numbers only, got {array.tolist()}")
    return array


def check_bounds(bounds, name: str):
    """A (lower, upper) pair with 0 < lower < upper < inf, or the string "fixed"."""
    if isinstance(bounds, str):
        if bounds == "fixed":
            return "fixed"
        raise ValueError(f"{name} must be a (lower, upper) pair or 'fixed', got {bounds!r}")
    try:
        lower, upper = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a (lower, upper) pair of positive numbers or 'fixed', got {bounds!r}"
        ) from None
    if not (np.isfinite(lower) and np.isfinite(upper)) or lower <= 0:
        raise ValueError(
            f"{name} must satisfy 0 < lower < upper < inf, got ({lower!r}, {upper!r})"
        )
    if lower >= upper:
        raise ValueError(
            f"{name} must satisfy lower < upper, got lower={lower!r} >= upper={upper!r} "
            "(inverted or empty bounds)"
        )
    return (lower, upper)


def check_within_bounds(value: np.ndarray, bounds, name: str) -> None:
    """Raise if any entry of value lies outside (lower, upper)."""
    if bounds == "fixed":
        return
    lower, upper = bounds
    values = np.atleast_1d(value)
    if np.any(values < lower * (1 - 1e-12)) or np.any(values > upper * (1 + 1e-12)):
        raise ValueError(
            f"{name} must lie inside its bounds [{lower!r}, {upper!r}], got {values.tolist()}"
        )


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_level(level, name: str = "level") -> float:
    """The level of a central interval: a real number strictly between 0 and 1."""
    if (isinstance(level, (bool, np.bool_)) or not isinstance(level, numbers.Real)
            or not 0.0 < float(level) < 1.0):
        raise ValueError(f"{name} must be a number strictly between 0 and 1, got {level!r}")
    return float(level)
