"""Stop cleanly on SIGINT (Ctrl-C) and SIGTERM (a scheduler's preemption).

The first signal asks the loop to stop after the current optimizer step, so it can save
``last.ckpt``; a second one exits at once (Python's default).

Once MindSpore 2.10 has run a compiled step, Ctrl-C reaches Python as SIGTERM: every graph run
re-installs a C++ SIGINT handler that sends the process SIGTERM (``IntHandler`` in its runtime).
Python cannot tell that SIGTERM from a scheduler's, so the stop line names both.
"""

from __future__ import annotations

import signal
import threading


class StopSignals:
    """A context manager: ``.received`` is the first signal's number, or None."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.received: int | None = None
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        if self.received is not None:  # the second one: stop now
            signal.signal(signum, signal.SIG_DFL)
            raise KeyboardInterrupt
        self.received = signum
        name = "SIGTERM (or Ctrl-C, which MindSpore passes on as SIGTERM)" if signum == signal.SIGTERM else "SIGINT"
        print(f"\n{name}: stopping after this step to save last.ckpt (again to quit at once)", flush=True)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # handlers live in the main thread
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
