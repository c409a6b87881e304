"""What the time budget cut in one ``approximation="auto"`` fit (``selection_.time_cuts``).

``auto`` fits within ``time_budget`` seconds. A candidate may go unlearned, and a learning
may be stopped at the budget. The restarts may stop before their count. The average over
the hyperparameters, the variance calibration and the nested score may not fit in the
time left. Each of these cuts depends on how long the steps before it took on the machine
at that moment. A fit with cuts is therefore not reproducible: the same rows and
``random_state`` can give another model (benchmarks/results/auto-panel.md, session 20: six
held-out folds of 47-58 s fits, test RMSE up to 18 % apart; every fit under 47 s predicted
the same in both runs). A fit without cuts ran each of its steps in full, so its model
depends on the rows and ``random_state`` alone.

The steps report their cuts with :func:`cut`, a no-op outside :func:`recording` (as
:func:`scalegp.estimators.auto_progress.stage`), so that no function of the choice needs
an extra argument. ``GPRegressor.fit`` records them in ``selection_.time_cuts``.
"""

from __future__ import annotations

import contextlib
import contextvars

__all__ = ["recording", "cut"]

_CUTS: contextvars.ContextVar = contextvars.ContextVar("scalegp_auto_time_cuts", default=None)


@contextlib.contextmanager
def recording():
    """Within the block, :func:`cut` appends to the list this yields (a new list for each
    block; an enclosing block's list is restored after it)."""
    cuts: list = []
    token = _CUTS.set(cuts)
    try:
        yield cuts
    finally:
        _CUTS.reset(token)


def cut(what: str) -> None:
    """Record that the time budget skipped or shortened ``what`` (a phrase such as "restarts
    of exact matern32: 3 of 8"), once, in the enclosing :func:`recording`'s list, if any."""
    cuts = _CUTS.get()
    if cuts is not None and what not in cuts:
        cuts.append(what)
