"""The verdict rules of the experiments (scalegp.experiments.verdicts) on synthetic numbers,
each rule in both directions and at its margin, and the verdict lines of rp-table3, rp-table4
and maclaurin-clusters on rows built from the numbers issue 24 quotes (a tie called
"reproduced", a comparison at rank 1,981 against 100 knots, an ESS of 39 against 697, a map
with RMSE 0.485 where the noise sd is 0.1)."""

import math

import numpy as np
import pytest

from scalegp.experiments import gibbs_real_data, gibbs_simulation, maclaurin, verdicts


def errors_with_rmse(rmse, n=177, seed=0):
    """Errors with exactly the given RMSE (a random direction scaled)."""
    e = np.random.default_rng(seed).standard_normal(n)
    return e * rmse / math.sqrt(np.mean(e**2))


def paired_errors(base_rmse, shift, n=400, seed=0):
    """(a, b) with b the base errors and a = b + shift * sign(b): a paired, consistent gap."""
    b = errors_with_rmse(base_rmse, n, seed)
    return b + shift * np.sign(b), b


# ----------------------------------------------------------------------------- the rules
def test_paired_accuracy_both_directions_and_tie():
    better, base = paired_errors(1.0, -0.2)
    assert verdicts.paired_accuracy(better, base).word == verdicts.REPRODUCED
    assert verdicts.paired_accuracy(base, better).word == verdicts.NOT_REPRODUCED
    # independent errors of equal RMSE: the difference is noise, within 2 se
    a, b = errors_with_rmse(2.2113, seed=1), errors_with_rmse(2.2130, seed=2)
    verdict = verdicts.paired_accuracy(a, b)
    assert verdict.word == verdicts.TIE and "RMSE 2.211 vs 2.213" in verdict.text


def test_paired_accuracy_margin_is_two_standard_errors():
    """d_i = a_i^2 - b_i^2 constant-plus-noise: the verdict flips where |mean d| crosses
    2 sd(d) / sqrt(n), computed here from d directly."""
    rng = np.random.default_rng(3)
    b = rng.uniform(1.0, 2.0, 200)
    noise = rng.standard_normal(200)
    noise = (noise - noise.mean()) / noise.std(ddof=1)            # mean 0, sd exactly 1
    for gap, word in ((-2.1, verdicts.REPRODUCED), (-1.9, verdicts.TIE),
                      (1.9, verdicts.TIE), (2.1, verdicts.NOT_REPRODUCED)):
        d = 0.1 * (gap / math.sqrt(200) + noise)                   # mean gap se, sd 0.1
        a = np.sqrt(b**2 + d)
        assert verdicts.paired_accuracy(a, b).word == word, gap


def test_paired_accuracy_refuses_unpaired_errors():
    with pytest.raises(ValueError, match="same length"):
        verdicts.paired_accuracy(np.zeros(3), np.zeros(4))


def test_paired_gap_within_the_comparators_seed_spread_is_a_tie():
    """Errors 0.08 % smaller at every point (RMSE 2.2113 against 2.2130, abalone's numbers)
    pass the paired rule, but the comparator's RMSE varies by more over its seeds: a tie.
    A gap beyond that spread keeps the paired verdict."""
    b = errors_with_rmse(2.2130, seed=4)
    a = b * (2.2113 / 2.2130)
    assert verdicts.paired_accuracy(a, b).word == verdicts.REPRODUCED
    tie = verdicts.paired_beyond_spread(a, b, [2.2130, 2.2160, 2.2100, 2.2150])
    assert tie.word == verdicts.TIE and "over 4 seeds" in tie.text
    assert verdicts.paired_beyond_spread(a, b, [2.2130, 2.2131, 2.2129]).word == \
        verdicts.REPRODUCED
    worse = b * 1.2
    assert verdicts.paired_beyond_spread(worse, b, [2.2130, 2.2131]).word == \
        verdicts.NOT_REPRODUCED
    with pytest.raises(ValueError, match="two seeds"):
        verdicts.paired_beyond_spread(a, b, [2.2130])


def test_seed_spread_both_directions_tie_and_one_seed():
    assert verdicts.seed_spread([1.0, 1.1, 0.9], [2.0, 2.1, 1.9]).word == verdicts.REPRODUCED
    assert verdicts.seed_spread([2.0, 2.1, 1.9], [1.0, 1.1, 0.9]).word == \
        verdicts.NOT_REPRODUCED
    # means 1.0 and 1.2, spread (sd over seeds) 0.5: a tie
    assert verdicts.seed_spread([0.5, 1.5, 1.0], [1.2, 1.7, 0.7]).word == verdicts.TIE
    assert verdicts.seed_spread([3.0, 3.1], [1.0, 1.1], lower_is_better=False).word == \
        verdicts.REPRODUCED
    assert verdicts.seed_spread([1.0], [2.0]).word == verdicts.NO_VERDICT


def test_ess_comparison_factor_two_and_nan():
    assert verdicts.ess_comparison(39, 697) == "worse"
    assert verdicts.ess_comparison(697, 39) == "better"
    assert verdicts.ess_comparison(400, 697) == "comparable"
    assert verdicts.ess_comparison(float("nan"), 355) == "not estimable"


def test_equal_rank_and_failure_rules():
    assert verdicts.equal_rank(100, 100) and verdicts.equal_rank(5, 64)
    assert not verdicts.equal_rank(1981, 100)
    tie = verdicts.Verdict(verdicts.REPRODUCED, "x")
    assert verdicts.at_equal_rank(tie, 100, 100) is tie
    qualified = verdicts.at_equal_rank(tie, 1981, 100)
    assert qualified.word == verdicts.UNEQUAL_RANK and "alone: reproduced" in qualified.text
    assert verdicts.fails(0.485, 0.1) and not verdicts.fails(0.036, 0.1)
    assert verdicts.fails(float("nan"), 0.1)


# ----------------------------------------------------------------------------- rp-table4
def table4_row(data, name, rmse, rank, ess1, ess2, seed):
    """A row of rp-table4; the knot-based ones with RMSEs over seeds 0.001 apart."""
    return {"data": data, "map": name, "rank": rank, "rmse": rmse,
            "errors": errors_with_rmse(rmse, seed=seed), "ess_theta1": ess1,
            "ess_theta2": ess2, "rmse_seeds": [rmse - 0.001, rmse, rmse + 0.001]}


def test_table4_verdicts_on_the_issue_numbers():
    """abalone 2.2113 / 2.2130 / 2.2189 is a tie, not "reproduced"; theta1's ESS 39 against
    697 is flagged; kin40k at rank 1,981 against 100 knots is not an equal-rank test."""
    rows = [table4_row("abalone", "RP eps 0.01", 2.2113, 223.1, 39, 31, 1),
            table4_row("abalone", "PP1 (random knots)", 2.2130, 100, 697, 747, 2),
            table4_row("abalone", "PP2 (pivoted Cholesky)", 2.2189, 100, 1, 2106, 3),
            table4_row("abalone", "PP1 at RP's rank", 2.2130, 223, 697, 747, 4),
            table4_row("kin40k", "RP eps 0.01", 0.2606, 1981.0, float("nan"), 355, 5),
            table4_row("kin40k", "PP1 (random knots)", 0.7292, 100, 819, 812, 6)]
    lines = gibbs_real_data.verdict_lines(rows)
    text = "\n".join(lines)
    assert verdicts.PAIRED_SPREAD_RULE in text and verdicts.RANK_RULE in text
    verdict_of = {line.split(":")[0]: line for line in lines if line.startswith("- abalone")
                  or line.startswith("- kin40k")}
    assert "**tie**" in verdict_of["- abalone, RP vs PP1 at RP's rank"]
    assert "**reproduced**" not in text
    pp1 = verdict_of["- abalone, RP vs PP1 (random knots)"]
    assert "**not at equal rank**" in pp1                 # 223 against 100 knots
    assert "theta1 worse (flagged: against the paper) (ESS 39 vs 697)" in pp1
    kin = verdict_of["- kin40k, RP vs PP1 (random knots)"]
    assert "**not at equal rank**" in kin and "rank 1981 vs 100" in kin
    assert "alone: reproduced" in kin and "theta1 not estimable" in kin


def test_table4_equal_rank_runs_only_below_the_cap():
    maps = gibbs_real_data.equal_rank_maps(223.1)
    assert [row[2] for row in maps] == [223, 223]
    assert {row[3]["knots"] for row in maps} == {"random", "pivoted_cholesky"}
    assert gibbs_real_data.equal_rank_maps(1981.0) == []


# ----------------------------------------------------------------------------- rp-table3
def table3_row(function, name, rmse, rank, ess, seed):
    """A row of rp-table3; the knot-based ones with RMSEs over seeds 1 % apart."""
    return {"function": function, "map": name, "rank": rank, "rmse": rmse,
            "errors": errors_with_rmse(rmse, n=1000, seed=seed), "ess_theta1": ess,
            "rmse_seeds": [0.99 * rmse, rmse, 1.01 * rmse]}


def test_table3_verdicts_say_the_projection_fails_the_wavy_function():
    rows = [table3_row("moderately wavy", "PP1 (equispaced knots)", 0.036, 64, 700, 1),
            table3_row("moderately wavy", "PP2 (pivoted Cholesky)", 0.040, 64, 800, 2),
            table3_row("moderately wavy", "RP eps 0.1", 0.485, 5.0, 9504, 3)]
    lines = gibbs_simulation.verdict_lines(rows)
    versus = [line for line in lines if line.startswith("- moderately wavy, RP eps 0.1 vs")]
    assert len(versus) == 2
    assert all("accuracy **not reproduced** (RMSE 0.485 vs 0.0" in line for line in versus)
    assert all("lower rank (5.0 vs 64)" in line and "theta1 better" in line for line in versus)
    assert lines[-1] == "Failures: RP eps 0.1 on moderately wavy (RMSE 0.485)."


def test_table3_pairs_that_both_fail_get_no_accuracy_verdict():
    """Highly wavy: every map above the noise sd 0.1 (0.657 and 0.667 measured)."""
    rows = [table3_row("highly wavy", "PP2 (pivoted Cholesky)", 0.667, 64, 1400, 1),
            table3_row("highly wavy", "RP eps 0.01", 0.657, 6.0, 5563, 2)]
    line = next(line for line in gibbs_simulation.verdict_lines(rows)
                if line.startswith("- highly wavy, RP"))
    assert ("accuracy **both fail** (RMSE 0.657 and 0.667 > noise sd 0.1; the accuracy rule"
            in line)
    assert verdicts.unless_both_fail(verdicts.Verdict(verdicts.TIE, "x"), 0.05, 0.667,
                                     0.1).word == verdicts.TIE


def test_table3_verdicts_of_a_better_projection():
    rows = [table3_row("almost flat", "PP1 (equispaced knots)", 0.05, 64, 1000, 1),
            table3_row("almost flat", "RP eps 0.01", 0.01, 6.0, 300, 2)]
    line = next(line for line in gibbs_simulation.verdict_lines(rows)
                if line.startswith("- almost flat, RP"))
    assert "accuracy **reproduced**" in line
    assert "theta1 worse (flagged: against the paper)" in line
    assert gibbs_simulation.verdict_lines(rows)[-1] == "Failures: none."


# ----------------------------------------------------------------------------- clusters
def cluster_row(dataset, D, method, theta, kl, rmse):
    return {"dataset": dataset, "D": D, "method": method, "theta": theta,
            "kl_seeds": kl, "rmse_seeds": rmse, "rmse": np.mean(rmse) if rmse else 0.5}


def test_cluster_verdicts_follow_the_seed_rule():
    kl_rows = [cluster_row("relief", 32, "local Maclaurin", 2.0, [900, 1000, 1100], None),
               cluster_row("relief", 32, "local Maclaurin", 16.0, [3000, 3100, 2900], None),
               cluster_row("yacht", 32, "local Maclaurin", 2.0, [1082] * 3, None),
               cluster_row("yacht", 32, "local Maclaurin", 16.0, [1082] * 3, None),
               cluster_row("kin40k", 32, "local Maclaurin", 0.125, [9000, 9100, 9200], None),
               cluster_row("kin40k", 32, "local Maclaurin", 16.0, [9100, 9000, 9300], None)]
    rmse_rows = [cluster_row("yacht", 32, "local Maclaurin", 2.0, None, [0.31, 0.30, 0.32]),
                 cluster_row("yacht", 32, "RFF", None, None, [0.23, 0.24, 0.22]),
                 cluster_row("yacht", 32, "SORF", None, None, [0.30, 0.36, 0.24])]
    lines = maclaurin.cluster_verdicts(kl_rows, rmse_rows)
    found = {line.split(":")[0]: line for line in lines if "KL at theta" in line}
    assert "**reproduced**" in found["- relief, D = 32"]
    assert "**tie**" in found["- yacht, D = 32"]          # one centre: equal KL
    assert "**tie**" in found["- kin40k, D = 32"]
    rmse = [line for line in lines if "lower test RMSE" in line]
    assert "than RFF: **not reproduced**" in rmse[0] and "than SORF: **tie**" in rmse[1]
    assert lines[-1] == "Failures: none."
    kl_rows.append(cluster_row("yacht (paper's l)", 32, "local Maclaurin", 2.0, [7e5] * 2,
                               [45.6, 45.7]) | {"rmse": 45.64})
    assert maclaurin.cluster_verdicts(kl_rows, [])[-1] == (
        "Failures: yacht (paper's l) local Maclaurin theta = 2 l D = 32 (RMSE 45.6).")


@pytest.mark.parametrize("module, name", [(gibbs_simulation, "table3"),
                                          (gibbs_real_data, "table4")])
def test_reduced_runs_say_so_in_their_title(module, name, monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(module, name, lambda *args: calls.append(args) or [])
    module.run_reduced(str(tmp_path))
    (directory, setting, title), = calls
    assert directory == tmp_path and setting is module.REDUCED
    assert title.startswith(" (reduced: ")
