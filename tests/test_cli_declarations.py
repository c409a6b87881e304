"""The command line's model flags against the estimators' parameters (scalegp.cli.options):
every parameter has a flag (or a declared reason), the defaults are the estimators' outside
the one declared table, no flag is silently ignored, and every option has help with its
default."""

import argparse
import inspect

import numpy as np
import pytest

import scalegp as sg
from scalegp import cli, kernels
from scalegp.cli import options
from scalegp.cli.common import CommandError
from scalegp.cli.fit import _make_estimator
from scalegp.estimators import configuration

OWNERS = options.ESTIMATORS + options.APPROXIMATION_CONFIGURATIONS + options.LOCAL_CONFIGURATIONS


def _parameters(owner):
    return [name for name in inspect.signature(owner.__init__).parameters if name != "self"]


def _declared(owner, name) -> bool:
    if (owner, name) in options.NOT_ON_THE_CLI:
        return True
    return any(owner in flag.owners and flag.parameter == name for flag in options.FLAGS)


@pytest.mark.parametrize("owner", OWNERS, ids=lambda owner: owner.__name__)
def test_every_parameter_has_a_flag(owner):
    missing = [name for name in _parameters(owner) if not _declared(owner, name)]
    assert missing == [], f"{owner.__name__} parameters without a flag: {missing}"


@pytest.mark.parametrize("flag", options.FLAGS, ids=lambda flag: flag.flag)
def test_flag_parameters_exist_and_agree_on_defaults(flag):
    defaults = {owner.__name__: options.parameter_default(owner, flag.parameter)
                for owner in flag.owners}
    first = next(iter(defaults.values()))
    assert all(value == first for value in defaults.values()), defaults


def _args(*extra):
    return cli.build_parser().parse_args(["fit", "data.csv", "--target", "y", "--out", "m.npz",
                                          *extra])


CONFIGURATIONS = {
    "auto": ((), sg.GPRegressor()),
    "nystrom": (("--approximation", "nystrom"), sg.LowRankGPRegressor()),
    "rff": (("--approximation", "rff"), sg.LowRankGPRegressor(approximation="rff")),
    "exact": (("--approximation", "exact"), sg.ExactGPRegressor()),
    "exact-neighbors": (("--approximation", "exact", "--local", "neighbors"),
                        sg.LowRankGPRegressor(approximation="exact", local="neighbors")),
    "nystrom-clusters": (("--local", "clusters"), sg.LowRankGPRegressor(local="clusters")),
    "nystrom-test-points": (("--local", "test-points"),
                            sg.LowRankGPRegressor(local="test-points")),
    "gibbs": (("--sampler", "gibbs"), sg.GibbsGPRegressor()),
    "vecchia": (("--approximation", "vecchia"), sg.VecchiaGPRegressor()),
}


def _comparable(params: dict) -> dict:
    out = {}
    for name, value in params.items():
        if name in options.DEFAULT_DIFFERENCES:
            continue
        if name == "kernel" and value is None:      # GPRegressor's: auto compares families
            pass
        elif name == "kernel":
            value = kernels.get(value).get_params()
            value = {key: np.ravel(v).tolist() if isinstance(v, (np.ndarray, list, tuple))
                     else v for key, v in value.items()}
        elif name in ("approximation", "local") and value != "auto":
            value = configuration.to_json(
                configuration.as_approximation(value) if name == "approximation"
                else configuration.as_local(value))
        elif isinstance(value, np.ndarray):
            value = value.tolist()
        out[name] = value
    return out


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_command_line_defaults_are_the_estimators(name):
    """The estimator the command line builds with no model flag equals the estimator's
    defaults, except for the declared differences (the whole table is used)."""
    extra, expected = CONFIGURATIONS[name]
    built = _make_estimator(_args(*extra), n_dims=2, n_samples=100)
    assert type(built) is type(expected)
    got, want = built.get_params(deep=False), expected.get_params(deep=False)
    assert _comparable(got) == _comparable(want)
    for parameter, (value, _) in options.DEFAULT_DIFFERENCES.items():
        if parameter in got:
            assert got[parameter] == (value if parameter != "dtype" else "float64")


def _flag_arguments(flag) -> list:
    samples = {"--option": ["--option", "n_nodes=4"], "--objective": ["--objective", "fitc"],
               "--solver": ["--solver", "qr"], "--signed-rule": ["--signed-rule", "keep"],
               "--knots": ["--knots", "random"], "--local": ["--local", "clusters"],
               "--dtype": ["--dtype", "float32"], "--n-jobs": ["--n-jobs", "2"],
               "--noise-variance-bounds": ["--noise-variance-bounds", "1e-3", "1"],
               "--theta1-grid": ["--theta1-grid", "0.1", "1", "5"],
               "--tau-prior": ["--tau-prior", "1", "1"],
               "--theta2-prior": ["--theta2-prior", "1", "1"],
               "--noise-variance": ["--noise-variance", "0.1"],
               "--local-threshold": ["--local-threshold", "1.5"],
               "--ordering": ["--ordering", "random"], "--optimizer": ["--optimizer", "fisher"]}
    if flag.flag in samples:
        return samples[flag.flag]
    if flag.negated or flag.flag in ("--local-lazy", "--local-reoptimize",
                                     "--diag-correction", "--map-per-atom"):
        return [flag.flag]
    return [flag.flag, "3"]


IGNORING = [(flag, name) for flag in options.FLAGS for name, (extra, _) in CONFIGURATIONS.items()
            if flag.flag != "--seed" and flag.flag != "--local"
            and not set(flag.owners) & set(options.chosen_parts(_args(*extra)))]


@pytest.mark.parametrize("flag, name", IGNORING,
                         ids=[f"{flag.flag}-{name}" for flag, name in IGNORING])
def test_a_flag_the_configuration_ignores_is_refused(flag, name):
    extra, _ = CONFIGURATIONS[name]
    args = _args(*extra, *_flag_arguments(flag))
    with pytest.raises(CommandError, match=f"{flag.flag} applies to"):
        _make_estimator(args, n_dims=2, n_samples=100)


def test_the_refusal_covers_the_issues_examples():
    for extra in (("--local-neighbors", "50"), ("--n-iter", "10"), ("--local-lazy",),
                  ("--local", "neighbors", "--local-threshold", "1")):
        with pytest.raises(CommandError, match="applies to"):
            _make_estimator(_args(*extra), n_dims=2, n_samples=100)
    built = _make_estimator(_args("--local", "neighbors", "--local-neighbors", "50",
                                  "--local-learning-centers", "7"), n_dims=2, n_samples=100)
    assert built.local == sg.Neighbors(n_neighbors=50, learning_centers=7)
    built = _make_estimator(_args("--approximation", "nystrom", "--objective", "vfe",
                                  "--learn-knots", "20", "--knots", "random"), 2, 100)
    assert built.approximation == sg.Nystrom(knots="random", objective="vfe", learn_knots=20)


def _subparsers():
    parser = cli.build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_option_has_help_with_its_default(command):
    parser = _subparsers()[command]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
        if action.option_strings and not action.required:
            text = action.help % {"default": action.default} if "%(" in action.help else action.help
            assert "default" in text, f"{command} {action.option_strings} shows no default"


#: The option groups of each command's --help (issue 28, item 4), in order; every option of
#: the command lies in one of them except the ones all commands share (COMMON).
GROUPS = {
    "fit": ["data", "model", "choosing the model (--approximation auto)",
            "Vecchia (--approximation vecchia)", "local models (--local)", "kernel", "learning",
            "sampler (--sampler gibbs)", "distributed (--dask-scheduler)", "output"],
    "evaluate": ["data", "model", "kernel", "learning"],
    "predict": ["data", "prediction", "output"],
}
COMMON = {"-h", "--quiet", "--debug", "--seed"}


@pytest.mark.parametrize("command", sorted(GROUPS))
def test_every_option_lies_in_its_group(command):
    parser = _subparsers()[command]
    named = [group for group in parser._action_groups if group._group_actions
             and group.title not in ("options", "optional arguments", "positional arguments")]
    assert [group.title for group in named] == GROUPS[command]
    loose = [action.option_strings[0] if action.option_strings else action.dest
             for group in parser._action_groups if group not in named
             for action in group._group_actions]
    assert set(loose) == COMMON, f"{command}: options outside the groups: {set(loose) - COMMON}"
    rendered = parser.format_help()
    for title in GROUPS[command]:
        assert f"\n{title}:\n" in rendered
