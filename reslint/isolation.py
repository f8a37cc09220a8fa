"""Run the checked code in a child process: a hang, an exit, a crash or a flood of output there
ends that file's tracing, never the run.

The child is forked, so torch (imported once by the parent) comes with it for free. It gets
its own session (a timeout kills everything user code started), stdout and stderr that go to
/dev/null (user prints cannot corrupt JSON or SARIF output), and reports back over a pipe: a
stage now and then ("importing", "tracing GPT") and finally the picklable result. The parent
enforces the time limit and turns whatever went wrong into one line naming the stage.

Where `fork` does not exist (Windows) the function runs in-process, as before.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_stage_writer: int | None = None  # the pipe to the parent, set in the child
_running: set[int] = set()  # children of this process still running


def report_stage(stage: str, line: int = 1, symbol: str = "") -> None:
    """Tell the parent what the child is doing (a no-op outside an isolated child)."""
    if _stage_writer is not None:
        _send(_stage_writer, ("stage", (stage, line, symbol)))


@dataclass(frozen=True)
class ChildFailure:
    """Why an isolated call returned no result, and what it was doing then."""

    cause: str  # "timed out after 10 s", "killed by signal 11 (SIGSEGV)", "exited with status 3"
    stage: str  # "importing the file", "tracing Net"
    line: int = 1
    symbol: str = ""


def run_isolated(function: Callable[..., Any], *args: Any, timeout: float | None) -> Any:
    """`function(*args)` in a forked child; its return value, or a ChildFailure."""
    if not hasattr(os, "fork"):
        return function(*args)
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, measured through the parent's view of it
        _child(function, args, reader, writer)
    os.close(writer)
    _running.add(pid)
    try:
        return _wait(pid, reader, timeout)
    finally:
        _running.discard(pid)
        os.close(reader)


def kill_running_children() -> None:
    """Kill every child still running (a worker being stopped calls this before it exits)."""
    for pid in list(_running):
        _kill(pid)


def _child(function: Callable[..., Any], args: tuple, reader: int, writer: int) -> None:
    global _stage_writer
    status = 0
    try:
        os.close(reader)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(devnull, stream)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        faulthandler.disable()  # a crash of the checked code is reported by the parent, in one line
        _stage_writer = writer
        value = function(*args)
        try:
            _send(writer, ("result", value))
        except Exception as error:  # noqa: BLE001 - an unpicklable result is reported, not hung on
            _send(writer, ("error", f"returned a result that could not be sent back: {type(error).__name__}: {error}"))
    except BaseException as error:  # noqa: BLE001 - the child must end here, whatever happened
        cause = f"called sys.exit({error.code!r})" if isinstance(error, SystemExit) else \
            f"raised {type(error).__name__}: {error}"
        try:
            _send(writer, ("error", cause))
        except BaseException:  # noqa: BLE001
            status = 70
    finally:
        os._exit(status)


def _send(writer: int, message: tuple) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    data = struct.pack("<Q", len(payload)) + payload
    while data:
        written = os.write(writer, data)
        data = data[written:]


def _wait(pid: int, reader: int, timeout: float | None) -> Any:
    deadline = None if timeout is None else time.monotonic() + timeout
    stage: tuple[str, int, str] = ("importing the file", 1, "")
    buffer = b""
    try:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                _kill(pid)
                return ChildFailure(f"timed out after {timeout:g} s", *stage)
            ready, _, _ = select.select([reader], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(reader, 1 << 16)
            if not chunk:  # the child is gone: its exit status says how
                return ChildFailure(_exit_cause(_reap(pid)), *stage)
            buffer += chunk
            while len(buffer) >= 8:
                size = struct.unpack("<Q", buffer[:8])[0]
                if len(buffer) < 8 + size:
                    break
                kind, value = pickle.loads(buffer[8:8 + size])
                buffer = buffer[8 + size:]
                if kind == "stage":
                    stage = value
                elif kind == "result":
                    _reap(pid)
                    return value
                else:
                    _reap(pid)
                    return ChildFailure(value, *stage)
    except BaseException:  # KeyboardInterrupt included: never leave the child behind
        _kill(pid)
        raise


def _kill(pid: int) -> None:
    # A second Ctrl-C or a SIGTERM must not interrupt the kill and leave the child running.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except (ProcessLookupError, PermissionError, OSError):
                pass
        _reap(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _reap(pid: int) -> int:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    return status


def _exit_cause(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "?"
        hint = ", out of memory?" if number == signal.SIGKILL else ""
        return f"killed by signal {number} ({name}{hint})"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return f"exited with status {code} (sys.exit or os._exit in the checked code)"
