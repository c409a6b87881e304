"""Verdict rules of the experiments: every verdict line is a stated rule applied to the numbers.

Each rule returns a :class:`Verdict` (the word and the numbers it was decided on) and has a
module-level text (``*_RULE``) that the experiment prints next to its table, so a reader can
re-derive each verdict from the table. The words:

- ``"reproduced"``: the paper's method is better by more than the rule's margin;
- ``"not reproduced"``: the comparator is better by more than the margin (the paper's claim
  is contradicted);
- ``"tie"``: the difference is within the margin (the claim is not supported either way);
- ``"not at equal rank"``: the pair differs too much in rank to test an equal-cost claim;
- ``"no verdict"``: the rule's margin cannot be measured (one seed);
- ``"both fail"``: both methods fail the task (:func:`fails`), so neither accuracy is evidence.

Rules:

* :func:`paired_accuracy` (one run, test points): with per-point squared errors
  a_i = (f_A(x_i) - y_i)^2 of the paper's method and b_i of the comparator, d_i = a_i - b_i,
  dbar = mean(d), se = sd(d) / sqrt(n). A is better iff dbar < -Z se, worse iff dbar > Z se,
  Z = 2 (a two-sided test at about 5 %, the test points taken as independent draws).
* :func:`paired_beyond_spread`: the paired rule, and a tie as well where the RMSE gap is
  within the comparator's standard deviation over its seeds (randomness the paired test over
  test points does not see).
* :func:`seed_spread` (several seeds): with the per-seed values of both methods, the margin
  is the larger of the two standard deviations over seeds (ddof = 1); A is better iff its
  mean is lower (for a loss) by more than the margin.
* :func:`ess_comparison`: Geyer-ESS estimates are noisy, so a factor of
  ``ESS_FACTOR`` = 2 is required: A mixes better iff ESS_A >= 2 ESS_B, worse iff
  ESS_B >= 2 ESS_A; a NaN ESS (a chain that never moved) is "not estimable".
* :func:`equal_rank`: an accuracy claim "at comparable cost" is tested only where the paper's
  method uses at most ``RANK_TOLERANCE`` = 1.1 times the comparator's rank.
* :func:`fails`: a fit of a known function fails where its RMSE against the truth exceeds
  the noise standard deviation (an estimate worse than the raw observations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Standard errors a paired difference must exceed (two-sided, about 5 %).
Z = 2.0
#: Factor between two effective sample sizes needed to call one chain better mixing.
ESS_FACTOR = 2.0
#: Largest ratio of the paper's method's rank to the comparator's for an equal-cost claim.
RANK_TOLERANCE = 1.1

REPRODUCED, NOT_REPRODUCED, TIE = "reproduced", "not reproduced", "tie"
UNEQUAL_RANK = "not at equal rank"
BOTH_FAIL = "both fail"
NO_VERDICT = "no verdict"

PAIRED_RULE = (
    f"Accuracy rule: with d_i the difference of squared test errors (paper's method minus "
    f"comparator) over the n test points, 'reproduced' iff mean(d) < -{Z:g} sd(d)/sqrt(n), "
    f"'not reproduced' iff mean(d) > {Z:g} sd(d)/sqrt(n), 'tie' otherwise.")
PAIRED_SPREAD_RULE = (
    PAIRED_RULE[:-1] + "; and 'tie' as well where the RMSE gap to the comparator's mean over "
    "its seeds (knot draws and chains) is within that mean's standard deviation over seeds.")
SEED_RULE = (
    "Seed rule: 'reproduced' iff the paper's method's mean over seeds is better than the "
    "comparator's by more than the larger standard deviation over seeds (the spread), 'not "
    "reproduced' iff worse by more than the spread, 'tie' otherwise; 'no verdict' with a "
    "single seed.")
ESS_RULE = (
    f"Mixing rule: 'better' iff ESS >= {ESS_FACTOR:g} x the comparator's, 'worse' iff the "
    f"comparator's ESS >= {ESS_FACTOR:g} x its own, 'comparable' otherwise; 'not estimable' "
    "where a chain never moved (ESS NaN). A 'worse' against the paper's claim of better "
    "mixing is flagged.")
RANK_RULE = (
    f"Rank rule: an accuracy claim is tested at equal cost only where the paper's method's "
    f"(average) rank is at most {RANK_TOLERANCE:g} x the comparator's; otherwise the verdict "
    "is 'not at equal rank' (the claim untested by that pair), with what the accuracy rule "
    "alone says.")
FAIL_RULE = ("Failure rule: a map fails a function where its held-out RMSE against the truth "
             "exceeds the noise sd; where both maps of a pair fail, the accuracy verdict is "
             "'both fail'.")


@dataclass(frozen=True)
class Verdict:
    """A verdict word and the numbers it was decided on (``text`` for the table)."""

    word: str
    text: str

    def __str__(self) -> str:
        return f"**{self.word}** ({self.text})"


def paired_accuracy(errors, other_errors) -> Verdict:
    """:data:`PAIRED_RULE` on the per-point errors (prediction - truth) of the paper's method
    and of the comparator, over the same test points."""
    a, b = np.asarray(errors, float) ** 2, np.asarray(other_errors, float) ** 2
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError("paired_accuracy needs two error vectors of the same length >= 2, "
                         f"got shapes {a.shape} and {b.shape}")
    d = a - b
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
    word = REPRODUCED if mean < -Z * se else NOT_REPRODUCED if mean > Z * se else TIE
    rmse, other = math.sqrt(a.mean()), math.sqrt(b.mean())
    return Verdict(word, f"RMSE {rmse:.4g} vs {other:.4g}; MSE difference {mean:.3g}, "
                         f"{Z:g} se = {Z * se:.3g}")


def paired_beyond_spread(errors, other_errors, other_rmses) -> Verdict:
    """:data:`PAIRED_SPREAD_RULE`: :func:`paired_accuracy`, turned into "tie" where the RMSE
    gap is within the comparator's standard deviation over its seeds (``other_rmses``, at
    least two: its knots' and chain's randomness, which the paired test does not see)."""
    paired = paired_accuracy(errors, other_errors)
    rmses = np.asarray(other_rmses, float)
    if rmses.size < 2:
        raise ValueError("paired_beyond_spread needs the comparator's RMSE at two seeds or more")
    spread = float(rmses.std(ddof=1))
    gap = abs(math.sqrt(np.mean(np.asarray(errors, float) ** 2)) - float(rmses.mean()))
    word = paired.word if gap > spread else TIE
    return Verdict(word, f"{paired.text}; comparator RMSE over {rmses.size} seeds "
                         f"{rmses.mean():.4g} +- {spread:.2g}")


def seed_spread(values, other_values, *, lower_is_better: bool = True) -> Verdict:
    """:data:`SEED_RULE` on per-seed values ("no verdict" with fewer than two seeds)."""
    a, b = np.asarray(values, float), np.asarray(other_values, float)
    if a.size < 2 or b.size < 2:
        return Verdict(NO_VERDICT, f"{a.mean():.4g} vs {b.mean():.4g}; one seed, no spread")
    spread = float(max(a.std(ddof=1), b.std(ddof=1)))
    gain = float(b.mean() - a.mean()) if lower_is_better else float(a.mean() - b.mean())
    word = REPRODUCED if gain > spread else NOT_REPRODUCED if gain < -spread else TIE
    return Verdict(word, f"{a.mean():.4g} vs {b.mean():.4g}, spread {spread:.3g}")


def ess_comparison(ess, other_ess) -> str:
    """:data:`ESS_RULE`: "better", "worse", "comparable" or "not estimable"."""
    if not (np.isfinite(ess) and np.isfinite(other_ess)):
        return "not estimable"
    if ess >= ESS_FACTOR * other_ess:
        return "better"
    if other_ess >= ESS_FACTOR * ess:
        return "worse"
    return "comparable"


def equal_rank(rank: float, other_rank: float) -> bool:
    """:data:`RANK_RULE`: whether rank <= RANK_TOLERANCE * other_rank."""
    return rank <= RANK_TOLERANCE * other_rank


def at_equal_rank(accuracy: Verdict, rank: float, other_rank: float) -> Verdict:
    """:data:`RANK_RULE` applied to an accuracy verdict: unchanged at equal rank, else the
    word "not at equal rank" with what the accuracy rule alone said."""
    if equal_rank(rank, other_rank):
        return accuracy
    return Verdict(UNEQUAL_RANK, f"rank {rank:.0f} vs {other_rank:.0f}; the accuracy rule "
                                 f"alone: {accuracy.word}, {accuracy.text}")


def fails(rmse: float, noise_sd: float) -> bool:
    """:data:`FAIL_RULE`: whether a fit's RMSE against the truth exceeds the noise sd."""
    return not rmse <= noise_sd


def unless_both_fail(accuracy: Verdict, rmse: float, other_rmse: float,
                     noise_sd: float) -> Verdict:
    """:data:`FAIL_RULE` applied to an accuracy verdict: "both fail" where both RMSEs exceed
    the noise sd (what the accuracy rule said is kept in the text), else unchanged."""
    if fails(rmse, noise_sd) and fails(other_rmse, noise_sd):
        return Verdict(BOTH_FAIL, f"RMSE {rmse:.4g} and {other_rmse:.4g} > noise sd "
                                  f"{noise_sd:g}; the accuracy rule alone: {accuracy.word}")
    return accuracy
