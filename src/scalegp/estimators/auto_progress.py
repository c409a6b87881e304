"""Progress of ``approximation="auto"``: one bar of the seconds spent against the time
budget, named after the stage in hand (the pilot, each candidate learned and scored, the
restarts, the final fit), advanced every ``TICK`` seconds by a thread of its own, so that it
moves while a candidate learns.

It speaks the package's progress protocol (:class:`scalegp.data.sources.ProgressBars`):
``progress.start_pass(name, total, unit="s", initial=elapsed)`` opens each stage's bar at the
seconds already spent (tqdm then gives the rate, 1 s/s, and the budget's seconds left), and
``progress(seconds)`` advances it. The stages are announced by :func:`stage`, a no-op
outside :func:`reporting`, so the choice's code needs no progress argument.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time

__all__ = ["TICK", "reporting", "stage"]

#: Seconds between two advances of the bar.
TICK = 0.5

_CURRENT: contextvars.ContextVar = contextvars.ContextVar("scalegp_auto_progress",
                                                          default=None)


class _Reporter:
    """The bar's state: the stage calls come from the choice, the ticks from a thread; one
    lock orders them."""

    def __init__(self, progress, budget: float, started: float):
        self.progress, self.budget, self.started = progress, float(budget), started
        self.lock = threading.Lock()
        self.stopped = threading.Event()

    def _elapsed(self) -> float:
        return round(time.perf_counter() - self.started, 1)

    def stage(self, name: str) -> None:
        with self.lock:
            start = getattr(self.progress, "start_pass", None)
            if start is not None:
                start(f"auto: {name}", self.budget, unit="s", initial=self._elapsed())
            self.progress(self._elapsed())

    def run(self) -> None:
        while not self.stopped.wait(TICK):
            with self.lock:
                self.progress(self._elapsed())


@contextlib.contextmanager
def reporting(progress, budget: float, started: float | None = None):
    """Within the block, :func:`stage` names the bar of ``progress`` (None: nothing is
    reported, no thread started); ``started`` is the ``time.perf_counter()`` the budget
    counts from (now by default). The thread ends with the block."""
    if progress is None:
        yield
        return
    reporter = _Reporter(progress, budget,
                         time.perf_counter() if started is None else started)
    token = _CURRENT.set(reporter)
    ticker = threading.Thread(target=reporter.run, name="scalegp-auto-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        reporter.stopped.set()
        ticker.join()
        _CURRENT.reset(token)


def stage(name: str) -> None:
    """Name the stage in hand on the bar of the enclosing :func:`reporting`, if any."""
    reporter = _CURRENT.get()
    if reporter is not None:
        reporter.stage(name)
