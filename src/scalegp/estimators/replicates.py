"""Repeated inputs: the nugget split into micro-scale variation and measurement error.

Where rows repeat an input exactly, a GP whose only nugget is the noise variance reads
repeated targets as replicate measurements: identical ones (copies of a record, or a
discrete target) tell its likelihood there is no noise, and it learns a noise variance near
zero and interpolates every row. On the wine data (1,440 training rows, 1,232 distinct
inputs, 220 of 224 groups with identical targets) every kernel family learned a noise
variance of 4.8e-6 of the targets' variance, and 0.13 on the distinct inputs' means; the
test RMSE of the exact Matern-3/2 GP was 0.3971, that of auto with the split below 0.3584
(benchmarks/results/auto-panel.md, session 16).

The model here is the geostatistical split of the nugget effect into micro-scale
variation and measurement error (Cressie, *Statistics for Spatial Data*, 1993, on the
nugget effect and kriging with measurement error): y = f(x) + m(x) + e, with f the smooth GP,
m a micro-scale process independent at distinct inputs and shared by equal ones (variance
s_m^2) and e the measurement error of each row (variance tau^2). Group the rows by input,
g = 1..u, with n_g rows, mean ybar_g and within-group sum of squares S_g. Then (Eq. R.1)

    log p(y) = log N(ybar; 0, K_ff(U) + diag(s_m^2 + tau^2 / n_g))
               - sum_g [(n_g - 1) / 2 log(2 pi tau^2) + S_g / (2 tau^2) + log(n_g) / 2],

the factorization of the likelihood over replicates used by Binois, Gramacy and
Ludkovski (2018, "Practical heteroscedastic Gaussian process modeling for large simulation
experiments"), with one tau^2 for every input (the orthonormal change of each group's rows
to its mean and n_g - 1 contrasts; the mean's density carries the 1 / sqrt(n_g)): the group
means are a GP's data with known per-row variances tau^2 / n_g added to a learned noise
variance, which is s_m^2. ``tau^2`` is taken at the maximum of the second term, the pooled
within-group variance sum S_g / sum (n_g - 1) (Eq. R.2; the pure-error estimate of a
replicated design); the model of the group means then learns the kernel and s_m^2 by
whatever ``auto`` chooses.

A new observation at an input x that no training row has: N(mu(x), v_f(x) + s_m^2 +
tau^2), the group-mean model's own prediction with tau^2 added. At the input of group g,
m(x_g) is known from the group's rows: given f, m(x_g) | ybar_g is Gaussian with weight
w_g = s_m^2 / (s_m^2 + tau^2 / n_g) on ybar_g - f(x_g), and with the model's latent
posterior N(mu_g, c_g) at x_g (Eq. R.3)

    E[y_new] = (1 - w_g) mu_g + w_g ybar_g,
    Var[y_new] = (1 - w_g)^2 c_g + w_g tau^2 / n_g + tau^2,

exact for any latent posterior, since given f the group's mean is the only datum on
m(x_g). Where every group's targets are identical (S_g = 0) tau^2 is taken at
``MIN_MEASUREMENT_VARIANCE`` of the targets' variance.

When the split applies (:func:`group_rows`; else the rows are fitted as they are):

- **Enough rows repeat an input to move the row-wise likelihood**: at least
  ``MIN_REPEATED_SHARE`` of the rows (sum (n_g - 1) / n). On wine, 14 %, the noise fell to
  4.8e-6 of the targets' variance; on protein, 2.5 %, the row-wise Vecchia model (m = 30)
  learned 0.033 and the split 0.010 + 0.030, at test RMSE 0.5242 against 0.5203, while
  auto's pilot on the group means chose another kernel family and the fit reached 0.535
  to 0.545 against 0.524; on pol, 0.2 %, the row-wise fit raised no warning.
- **Most repeated inputs carry identical targets** (more than ``MIN_IDENTICAL_SHARE`` of the
  groups with n_g > 1). Under a continuous noise two rows at one input are equal with
  probability zero; identical ones are copies of a record or a discrete target, and they
  are what makes the row-wise likelihood read the data as noise-free. Where the repeated
  rows' targets differ that likelihood is well posed, and fixing tau^2 at their spread
  constrains the noise of every input: on the flights data (12 of 236 repeated inputs with
  identical targets, tau^2 = 0.102) the pilot's held-back NLPD rose from 1.26 to 1.53 and
  the test RMSE from 0.9095 to 0.9347.
- **The micro-scale part is not empty**: s_m^2 = c_0 - tau^2 > 0 for the nugget c_0, which
  the semivariance of the group means of nearest distinct inputs, nu = mean (ybar_g -
  ybar_nn(g))^2 / 2, bounds from above (it adds the smooth part's variation at that lag);
  tau^2 <= ``MAX_SPLIT_SHARE`` nu. On concrete (tau^2 = 0.136 from 29 degrees of freedom,
  nu = 0.129) the split learned s_m^2 at its floor and the test RMSE rose from 0.2485 to
  0.2814; on wine tau^2 = 4.8e-6 against nu = 0.275.

(Standardized targets; benchmarks/results/auto-panel.md, session 16.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["Replicates", "group_rows", "predictive", "identical_share", "nearest_semivariance",
           "MIN_MEASUREMENT_VARIANCE", "MAX_SPLIT_SHARE", "MIN_IDENTICAL_SHARE",
           "MIN_REPEATED_SHARE"]

#: The measurement-error variance, as a share of the targets' variance, where the repeated
#: rows' targets are all identical (no spread to estimate it from).
MIN_MEASUREMENT_VARIANCE = 1e-6
#: The largest tau^2, as a share of the nearest distinct inputs' semivariance nu, for which
#: the nugget is split (module docstring): at least half of nu is left to the micro-scale
#: variation and the smooth part.
MAX_SPLIT_SHARE = 0.5
#: The share of the rows that repeat an input (sum (n_g - 1) / n) from which the nugget is
#: split (module docstring): wine 0.14 against protein 0.025 and pol 0.002.
MIN_REPEATED_SHARE = 0.05
#: The share of the repeated inputs whose rows' targets are identical above which the
#: nugget is split (module docstring): wine 0.99, protein 0.97, pol 1.0 against flights
#: 0.05 and concrete 0.50 (the panel's training parts; keggdirected's 0.89, where tau^2 is
#: over half of nu).
MIN_IDENTICAL_SHARE = 0.5


@dataclass
class Replicates:
    """Training rows grouped by input (Eq. R.1): ``inputs`` (u, d) the distinct inputs,
    ``means`` and ``counts`` (u,) their rows' mean target and number, ``within`` the
    within-group sum of squares sum S_g, ``measurement_variance`` tau^2 (Eq. R.2) and
    ``degrees_of_freedom`` sum (n_g - 1)."""

    inputs: np.ndarray
    means: np.ndarray
    counts: np.ndarray
    within: float
    measurement_variance: float
    degrees_of_freedom: int

    #: What a model file stores (``scalegp.io``, metadata ``front_door.replicates`` and
    #: arrays ``replicates.<name>``): the arrays with their shapes' symbols, then the
    #: numbers.
    STATE_ARRAYS = {"inputs": ("distinct_inputs", "d"), "means": ("distinct_inputs",),
                    "counts": ("distinct_inputs",)}
    STATE_VALUES = ("within", "measurement_variance", "degrees_of_freedom")

    @classmethod
    def from_state(cls, arrays: dict, values: dict, estimator=None) -> "Replicates":
        """The grouping a model file stored (``STATE_ARRAYS``, ``STATE_VALUES``), checked,
        against the rows of the fitted ``estimator`` too where its posterior holds them (an
        exact or Vecchia model: one row per distinct input)."""
        inputs, means, counts = (np.asarray(arrays[name], dtype=float)
                                 for name in cls.STATE_ARRAYS)
        within, tau2, dof = (float(values[name]) for name in cls.STATE_VALUES)
        if not (within >= 0 and tau2 > 0 and dof >= 1 and dof == int(dof)):
            raise ValueError(f"a within-group sum of squares >= 0, a measurement-error "
                             f"variance > 0 and whole degrees of freedom >= 1 are needed, got "
                             f"{within!r}, {tau2!r}, {dof!r}")
        if not (np.all(counts >= 1) and np.all(counts == np.round(counts))
                and int(counts.sum()) - len(counts) == dof):
            raise ValueError("the group counts must be whole numbers >= 1 that exceed the "
                             "distinct inputs by the degrees of freedom")
        if inputs.ndim != 2 or len(inputs) < 1 or _distinct(inputs) is not None:
            raise ValueError("the distinct inputs must be distinct rows")
        if not np.isclose(tau2, _stored_measurement_variance(means, counts, within, dof),
                          rtol=1e-6, atol=0.0):
            raise ValueError(f"the measurement-error variance {tau2!r} is not the one Eq. R.2 "
                             "gives for the groups (the pooled within-group variance, or "
                             "the floor where every group's targets are identical)")
        rows = getattr(getattr(estimator, "posterior_", None), "X_train", None)
        if isinstance(rows, np.ndarray) and len(rows) != len(inputs):
            raise ValueError(f"{len(inputs)} distinct inputs for a model fitted on "
                             f"{len(rows)} rows")
        return cls(inputs, means, counts, within, tau2, int(dof))

    def known_variances(self) -> np.ndarray | None:
        """tau^2 / n_g, the variance of each group mean's measurement error, which the
        model of the group means adds to its learned noise variance s_m^2; None where
        every group's targets are identical (tau^2 is then the floor, negligible against
        s_m^2, and the group means are fitted as plain rows)."""
        return None if self.within == 0 else self.measurement_variance / self.counts

    def note(self) -> str:
        """What ``selection_.notes`` says of the grouping."""
        n = int(self.counts.sum())
        spread = (f"measurement-error variance {self.measurement_variance:.3g} from the "
                  f"targets' spread within the groups ({self.degrees_of_freedom} degrees of "
                  "freedom)" if self.within > 0 else
                  "every repeated input's targets identical: measurement-error variance "
                  f"taken at {MIN_MEASUREMENT_VARIANCE:g} of the targets' variance")
        return (f"{n - len(self.inputs)} of {n} rows repeat an input: learned on the "
                f"{len(self.inputs)} distinct inputs' mean targets, the noise variance being "
                f"the micro-scale variance; {spread} (scalegp.estimators.replicates)")

    def groups_of(self, X) -> np.ndarray:
        """The group of each row of X whose input equals a training input exactly, else -1:
        the rows' keys (:func:`_row_keys`) looked up among the distinct inputs' sorted keys,
        and each match checked row by row."""
        X = _canonical(X)
        keys = _row_keys(self.inputs)
        order = np.argsort(keys, kind="stable")
        if np.any(keys[order][1:] == keys[order][:-1]):   # two distinct inputs share a key
            lookup = {row.tobytes(): g for g, row in enumerate(_canonical(self.inputs))}
            return np.array([lookup.get(row.tobytes(), -1) for row in X], dtype=int)
        found = np.minimum(np.searchsorted(keys[order], _row_keys(X)), len(keys) - 1)
        groups = order[found]
        equal = np.all(_canonical(self.inputs)[groups] == X, axis=1)
        return np.where(equal, groups, -1)

    def new_observation(self, X, mean, latent_variance, micro_variance):
        """(mean, variance) of a new observation at each row of X (Eq. R.3 at training
        inputs; elsewhere the latent variance plus s_m^2 + tau^2). ``mean`` and
        ``latent_variance`` are the group-mean model's latent posterior at X (the variance
        None: the mean alone is returned; Eq. R.3's weight does not depend on it),
        ``micro_variance`` its learned noise variance s_m^2."""
        tau2 = self.measurement_variance
        mean = np.array(mean, dtype=float)
        groups = self.groups_of(X)
        at = groups >= 0
        known = tau2 / self.counts[groups[at]]
        weight = micro_variance / (micro_variance + known)
        mean[at] = (1 - weight) * mean[at] + weight * self.means[groups[at]]
        if latent_variance is None:
            return mean
        variance = np.asarray(latent_variance, dtype=float) + micro_variance + tau2
        variance[at] = ((1 - weight) ** 2 * np.asarray(latent_variance)[at]
                        + weight * known + tau2)
        return mean, variance


def _stored_measurement_variance(means, counts, within: float, dof: int) -> float:
    """tau^2 as :func:`group_rows` took it, from a stored grouping: within / dof, or where
    the targets are identical within every group (``within`` 0, every row its group's mean)
    the floor of the targets' variance, here that of the group means weighted by their
    counts."""
    if within > 0:
        return within / dof
    centre = np.average(means, weights=counts)
    return MIN_MEASUREMENT_VARIANCE * max(
        float(np.average((means - centre) ** 2, weights=counts)), np.finfo(float).tiny)


def _canonical(X) -> np.ndarray:
    """X as contiguous float64 with -0.0 read as 0.0, so that equal inputs have equal bytes."""
    return np.ascontiguousarray(np.asarray(X, dtype=float) + 0.0)


def _distinct(X):
    """(distinct rows, the group of each row, counts) of X, or None where no row repeats:
    each row hashed to one 64-bit key (the splitmix64 finalizer over its columns' bits),
    the groups of equal keys checked row by row, and ``np.unique`` over rows only where two
    unequal rows share a key (sorting 3 million rows in 6 inputs by ``np.unique`` takes
    8 s, their keys 1.6 s)."""
    X = _canonical(X)
    _, first, index, counts = np.unique(_row_keys(X), return_index=True, return_inverse=True,
                                        return_counts=True)
    if len(first) == len(X):
        return None
    if np.array_equal(X, X[first[index]]):
        return X[first], index.ravel(), counts
    inputs, index, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    return None if len(inputs) == len(X) else (inputs, index.ravel(), counts)


def _row_keys(X) -> np.ndarray:
    """One 64-bit key per row of X: the splitmix64 finalizer over its columns' bits (-0.0
    read as 0.0); equal rows have equal keys."""
    keys = np.zeros(np.shape(X)[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in _canonical(X).view(np.uint64).T:
            keys = _mix(keys ^ column)
    return keys


def _mix(z):
    """The splitmix64 finalizer (Steele, Lea and Flood 2014) of uint64 values, wrapping."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _identical_groups(index, y, counts):
    """(whether each group's rows' targets are all equal, the smallest of them);
    ``index`` the group of each row."""
    low = np.full(len(counts), np.inf)
    high = np.full(len(counts), -np.inf)
    np.minimum.at(low, index, y)
    np.maximum.at(high, index, y)
    return low == high, low


def identical_share(index, y, counts) -> float:
    """The share of the repeated inputs (groups of more than one row; ``index`` the group
    of each row) whose rows' targets are all equal."""
    identical, _ = _identical_groups(index, y, counts)
    return float(np.mean(identical[counts > 1]))


def _representable(y) -> bool:
    """Whether tau^2 and its floor (``MIN_MEASUREMENT_VARIANCE`` of the targets' variance),
    in squared target units, are normal float64 numbers: the targets are all equal, or
    their spread's square neither overflows nor underflows (the estimators scale by the
    std; a square of targets of 1e-160 was floored at 1e-314, the predictive std of a
    training input 1,500 times the targets' scale, and one of 1e160 was infinite)."""
    with np.errstate(over="ignore", under="ignore"):
        spread = np.max(np.abs(y - y[0]))
        square = spread ** 2
        return bool(spread == 0 or (np.isfinite(square * len(y)) and MIN_MEASUREMENT_VARIANCE
                                    * square / len(y) >= np.finfo(float).tiny))


def _floor(y) -> float:
    """The measurement-error variance where every repeated input's targets are identical:
    ``MIN_MEASUREMENT_VARIANCE`` of the targets' variance (the smallest normal float where
    they are all equal)."""
    return MIN_MEASUREMENT_VARIANCE * max(float(np.var(y)), np.finfo(float).tiny)


def nearest_semivariance(inputs, means) -> float:
    """nu: half the mean squared difference of the group means of nearest distinct inputs
    (module docstring), which bounds the nugget from above."""
    _, nearest = cKDTree(inputs).query(inputs, k=2)
    return float(np.mean((means - means[nearest[:, 1]]) ** 2) / 2)


def group_rows(X, y, rules: bool = True) -> Replicates | None:
    """The rows of (X, y) grouped by input (Eqs. R.1, R.2); None where no input repeats,
    and with ``rules`` where fewer than
    ``MIN_REPEATED_SHARE`` of the rows repeat an input, where at most ``MIN_IDENTICAL_SHARE`` of the repeated inputs have identical targets, or
    where the measurement-error variance is over ``MAX_SPLIT_SHARE`` of the nearest distinct
    inputs' semivariance (module docstring)."""
    found = _distinct(X)
    if found is None or (rules and len(X) - len(found[0]) < MIN_REPEATED_SHARE * len(X)):
        return None
    inputs, index, counts = found
    y = np.asarray(y, dtype=float)
    if not _representable(y):
        if rules:
            return None
        raise ValueError("the targets' spread is too large or too small for their variances "
                         "to be float64 numbers (beyond about 1e150 or below 1e-148): scale "
                         "them, or fit the rows as given (split_nugget=None or False)")
    identical, low = _identical_groups(index, y, counts)
    if rules and float(np.mean(identical[counts > 1])) <= MIN_IDENTICAL_SHARE:
        return None
    # a group of identical targets has their value as its mean and no spread, exactly (the
    # mean's rounding aside); only the others' spread is measurement error (Eq. R.2)
    means = np.where(identical, low, np.bincount(index, weights=y) / counts)
    within = float(np.sum(np.where(identical[index], 0.0, y - means[index]) ** 2))
    dof = int(len(X) - len(inputs))
    if not within / dof > 0:         # every group's targets identical (or an underflow)
        within = 0.0
    measurement = within / dof if within > 0 else _floor(y)
    if rules and (len(inputs) < 2 or measurement
                  > MAX_SPLIT_SHARE * nearest_semivariance(inputs, means)):
        return None
    return Replicates(inputs, means, counts.astype(float), within, measurement, dof)


def predictive(estimator, grouped: Replicates | None, X, include_noise: bool,
               return_variance: bool = True):
    """(mean, variance) at the rows of X of a new observation (``include_noise``) or of the
    latent function, or the mean alone (``return_variance=False``, the estimator's std not
    computed): the fitted ``estimator``'s, or where it was fitted on the group means of
    ``grouped`` Eq. R.3 (:meth:`Replicates.new_observation`; the latent function f + m
    without the measurement error tau^2). The estimator's noise variance, s_m^2, is
    standardized: in the targets' units it is ``noise_variance_ * y_train_std_**2``."""
    micro = (None if grouped is None
             else estimator.noise_variance_ * estimator.y_train_std_ ** 2)
    if not return_variance:
        mean = estimator.predict(X)
        return mean if grouped is None else grouped.new_observation(X, mean, None, micro)
    if grouped is None:
        mean, std = estimator.predict(X, return_std=True, include_noise=include_noise)
        return mean, std ** 2
    mean, std = estimator.predict(X, return_std=True)
    mean, variance = grouped.new_observation(X, mean, std ** 2, micro)
    if not include_noise:
        variance = np.maximum(variance - grouped.measurement_variance, 0.0)
    return mean, variance
