"""Stop cleanly on SIGINT (Ctrl-C) and SIGTERM (a scheduler's preemption).

The first signal stops the loop after this optimizer step, to save ``last.ckpt``; a second exits
at once. MindSpore 2.10's compiled graphs turn Ctrl-C into SIGTERM, so the stop line names both."""

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
