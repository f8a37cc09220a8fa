"""A time limit on the main thread (SIGALRM), nestable: the trace engine's per-file budget and the
capture chain's share of it for one step."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from reslint.trace.loader import TraceTimeout


@contextlib.contextmanager
def time_limit(seconds: float | None, error: type[BaseException] = TraceTimeout) -> Iterator[None]:
    """Raise `error` after `seconds` (main thread with SIGALRM only; elsewhere no limit). Nested inside
    another limit it ends at the outer one's expiry at the latest (raising the outer's error then), and
    the outer limit runs on afterwards with the time that is left."""
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return
    outer, _ = signal.getitimer(signal.ITIMER_REAL)
    own = not outer or seconds < outer  # else the outer limit expires first
    expired = []

    def expire(signum: int, frame: Any) -> None:
        expired.append(own)
        if not own and callable(previous):
            previous(signum, frame)  # the outer limit's handler raises its own error
        raise error() if own else TraceTimeout()

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(min(seconds, outer) if outer else seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer and expired != [False]:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 0.001))
