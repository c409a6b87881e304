"""``scalegp info MODEL``: what a model file holds, read through the checked loader."""

from __future__ import annotations

from .common import _log


def describe_model(path) -> str:
    """The model's estimator, parameters, fitted hyperparameters, table columns and, for a
    model that ``--approximation auto`` chose, the table of its choice."""
    from ..io import load, load_table_columns
    model = load(path)
    columns = load_table_columns(path)
    fitted = getattr(model, "estimator_", model)
    lines = [f"model file: {path}"]
    if fitted is not model:
        lines.append(f"estimator: GPRegressor(approximation={model.approximation!r}) -> "
                     f"{type(fitted).__name__}")
    else:
        lines.append(f"estimator: {type(fitted).__name__}")
    params = fitted.get_params(deep=False)
    lines.append("parameters: " + ", ".join(f"{name}={value!r}" for name, value in
                                            sorted(params.items()) if name != "kernel"))
    lines.append(f"inputs: {fitted.n_features_in_}"
                 + ("" if columns is None else
                    f" (columns {', '.join(columns.inputs)}; target {columns.target})"))
    lines.append(f"fitted kernel: {fitted.kernel_}")
    noise = getattr(fitted, "noise_variance_", None)
    if noise is not None:
        lines.append(f"noise variance: {noise:.6g} (standardized targets)")
    value = getattr(fitted, "log_marginal_likelihood_value_", None)
    if value is not None:
        lines.append(f"log marginal likelihood: {value:.6g}")
    neighbours = getattr(fitted, "prediction_neighbors_", None)
    if neighbours is not None:       # a Vecchia model: what n_neighbors_predict came to
        lines.append(f"prediction neighbours: {neighbours} training points per test point")
    calibration = getattr(model, "variance_calibration_", None)
    if calibration is not None:
        lines.append(calibration.describe())
    for name in ("replicates_", "hyperparameter_average_"):     # what predicts besides
        component = getattr(model, name, None)
        if component is not None:
            lines.append(component.note())
    selection = getattr(model, "selection_", None)
    if selection is not None:
        lines += ["", "how --approximation auto chose (predicted and measured on the pilot's "
                  "held-back rows):", selection.table()]
    return "\n".join(lines)


def command_info(args) -> None:
    print(describe_model(args.model))
    _log(args, "read through the checked loader (docs/model-files.md)")
