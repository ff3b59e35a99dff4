"""All or nothing under signals: the body of ``rolled_back(undo)`` is undone when it fails or
is stopped. SIGTERM (``timeout``, a scheduler) and SIGHUP (a closed terminal) raise as Ctrl-C
does while it runs, so they are undone too (unless the process ignores them, as under
``nohup``); the undo itself cannot be cut short by another one. With ``hold=True`` (a command
about to report and exit) a body that succeeded stays a success: from its last step on, stop
signals are ignored, so no signal in the last moment turns a complete project into an exit 143
(a retrying script would then meet "destination exists")."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Ctrl-C first (Python raises on it already); no SIGHUP on Windows
STOP_SIGNALS = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None
)


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextmanager
def rolled_back(undo: Callable[[], None], hold: bool = False) -> Iterator[None]:
    """Run the body with SIGTERM and SIGHUP raising as Ctrl-C does; on any exception, ``undo()``
    with every stop signal ignored (a second Ctrl-C cannot cut the rollback short), then re-raise.
    ``hold``: once the body succeeded, every stop signal is ignored (not restored) until the process ends."""
    main = threading.current_thread() is threading.main_thread()  # handlers live in the main thread
    # A signal already ignored stays so (``nohup``: a closed terminal must not stop the run).
    stops = [s for s in STOP_SIGNALS[1:] if signal.getsignal(s) is not signal.SIG_IGN] if main else []
    previous = {s: signal.signal(s, _interrupt) for s in stops}
    try:
        yield
        if hold and main:  # complete: the finally below ignores stop signals from here on (a signal
            previous = dict.fromkeys(STOP_SIGNALS, signal.SIG_IGN)  # before it still rolls back)
    except BaseException:
        held = {s: signal.signal(s, signal.SIG_IGN) for s in STOP_SIGNALS} if main else {}
        try:
            undo()
        finally:
            for signum, handler in held.items():
                signal.signal(signum, handler)
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
