"""What ``approximation="auto"`` considered and chose (issue 26): the candidates' table
(:class:`Candidate`) and the :class:`Selection`, printed by ``scalegp fit``, stored in model
files and shown by ``scalegp info`` (:mod:`scalegp.estimators.auto` builds them)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Candidate", "Selection", "TABLE_COLUMNS", "STORED_FIELDS"]


@dataclass
class Candidate:
    """One configuration: its predicted cost and accuracy, and its measured accuracy (on the
    pilot's held-back rows, or by cross-validation where it was learned on all rows:
    :mod:`scalegp.estimators.auto_validation`)."""

    name: str
    configuration: dict
    seconds: float
    memory_bytes: float
    predicted_ratio: float | None
    note: str = ""
    measured_ratio: float | None = None
    measured_kl: float | None = None
    ratio_upper: float | None = None      # their one-sided 95 % upper bounds (verify)
    kl_upper: float | None = None
    fit_seconds: float | None = None
    cv_rmse: float | None = None
    cv_nlpd: float | None = None
    #: Likelihood evaluations (and knot steps) its predicted seconds count (not stored).
    steps: float = 1.0

    @property
    def conditioning_seconds(self) -> float:
        """Predicted seconds of the fit at fixed hyperparameters: one of its steps."""
        return self.seconds / max(self.steps, 1.0)


#: The columns of :meth:`Selection.table`: (header, Candidate attribute, format); a column no
#: candidate fills is left out.
TABLE_COLUMNS = (("predicted s", "seconds", ".3g"), ("fit s", "fit_seconds", ".3g"),
                 ("memory MB", "memory_bytes", "MB"),
                 ("predicted RMSE ratio", "predicted_ratio", ".4g"),
                 ("measured RMSE ratio", "measured_ratio", ".4g"),
                 ("measured mean KL", "measured_kl", ".3g"),
                 ("RMSE ratio 95 % upper", "ratio_upper", ".4g"),
                 ("mean KL 95 % upper", "kl_upper", ".3g"),
                 ("CV RMSE", "cv_rmse", ".4g"), ("CV NLPD", "cv_nlpd", ".4g"))
#: Candidate fields stored in model files (:meth:`Selection.to_json`).
STORED_FIELDS = ("name", "seconds", "memory_bytes", "predicted_ratio", "note",
                 "measured_ratio", "measured_kl", "ratio_upper", "kl_upper", "fit_seconds",
                 "cv_rmse", "cv_nlpd")


@dataclass
class Selection:
    """What ``select`` considered and chose."""

    candidates: list
    chosen: Candidate
    reason: str
    pilot: object               # the Pilot (auto.py); None: the exact GP chosen without one
    time_budget: float
    memory_budget: float
    tolerance: object
    rate: float
    slowdown: float             # measured pilot seconds over predicted (auto_costs.calibrate)
    notes: list = field(default_factory=list)
    #: The chosen estimator, already learned on all rows (the validated choice), or None;
    #: with what its learning warned. Neither is stored.
    estimator: object = None
    warnings: list = field(default_factory=list)
    #: The chosen model's variance calibration where its nested cross-validation kept it
    #: (:mod:`scalegp.estimators.variance_calibration`), else None; ``notes`` says which.
    #: Not stored here (a model file keeps it with the GPRegressor).
    calibration: object = None
    #: The chosen exact GP's hyperparameters integrated out where that was kept
    #: (:class:`scalegp.estimators.hyperparameter_average.HyperparameterAverage`), else
    #: None; likewise kept with the GPRegressor.
    average: object = None
    #: What the time budget skipped or shortened, each a phrase
    #: (:mod:`scalegp.estimators.auto_budget`): empty where every step ran in full, and the
    #: model then depends on the rows and ``random_state`` alone; None where not recorded
    #: (``select`` called directly, or a model file written before it was).
    time_cuts: list | None = None

    @property
    def configuration(self) -> dict:
        """The chosen configuration as estimator keyword arguments."""
        return dict(self.chosen.configuration)

    def table(self) -> str:
        """A Markdown table of the candidates, the choice and the notes."""
        columns = [column for column in TABLE_COLUMNS
                   if any(getattr(c, column[1]) is not None for c in self.candidates)]

        def cell(value, fmt):
            if value is None:
                return ""
            return format(value / 1e6, ".3g") if fmt == "MB" else format(value, fmt)

        rows = ["| candidate | " + " | ".join(header for header, _, _ in columns) + " | |",
                "|---" * (len(columns) + 2) + "|"]
        for c in self.candidates:
            mark = "; ".join(filter(None, ["chosen" if c is self.chosen else "", c.note]))
            rows.append(f"| {c.name} | " + " | ".join(cell(getattr(c, attribute), fmt)
                                                     for _, attribute, fmt in columns)
                        + f" | {mark} |")
        return "\n".join(rows + ["", f"chosen: {self.chosen.name}: {self.reason}"]
                         + [f"note: {note}" for note in self.notes] + self._time_line())

    def _time_line(self) -> list:
        if self.time_cuts is None:
            return []
        if not self.time_cuts:
            return ["time budget: no step was cut (the same rows and an integer "
                    "random_state give this model again)"]
        return [f"time budget: it cut {'; '.join(self.time_cuts)}. A refit with the same "
                "random_state can differ where a step's seconds decide; a larger "
                "time_budget runs more of them"]

    def to_json(self) -> dict:
        """The table, the choice and the budgets as JSON values (stored in model files)."""
        return {"candidates": [{key: getattr(c, key) for key in STORED_FIELDS}
                               for c in self.candidates],
                "chosen": self.chosen.name, "reason": self.reason,
                "time_budget": self.time_budget, "memory_budget": self.memory_budget,
                "tolerance": self.tolerance, "rate": self.rate, "slowdown": self.slowdown,
                "notes": list(self.notes), "time_cuts": self.time_cuts}

    @classmethod
    def from_json(cls, value: dict) -> Selection:
        """The selection of :meth:`to_json` (without the pilot and configurations; files
        written before the validated choice lack its fields)."""
        found = [Candidate(**{key: row.get(key) for key in STORED_FIELDS}, configuration={})
                 for row in value["candidates"]]
        chosen = next((c for c in found if c.name == value["chosen"]), None)
        if chosen is None:
            raise ValueError(f"the chosen candidate {value['chosen']!r} is not in the table")
        cuts = value.get("time_cuts")
        if cuts is not None and not (isinstance(cuts, list)
                                     and all(isinstance(cut, str) for cut in cuts)):
            raise ValueError(f"the selection's time_cuts must be a list of strings, got "
                             f"{cuts!r}")
        return cls(found, chosen, str(value["reason"]), None, value["time_budget"],
                   value["memory_budget"], value["tolerance"], value["rate"],
                   value["slowdown"], list(value.get("notes", [])),
                   time_cuts=None if cuts is None else list(cuts))
