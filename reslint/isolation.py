"""Run the checked code in a child process: a hang, an exit, a crash or a flood of output there
ends that file's tracing, never the run, and nothing it started outlives the check.

Two processes are forked. The *keeper* becomes a child subreaper (Linux `prctl`), so whatever
the checked code starts, daemons that `setsid` and double-fork included, is re-parented to it
when its parent dies; when the *worker* running the checked code ends, or the keeper is told to
stop (the parent's time limit, Ctrl-C, the parent's death), the keeper kills every process below
it and exits. The worker is forked from the keeper (torch, imported once by the parent, comes with
it for free), gets its own session, stdout and stderr that go to /dev/null (user prints cannot
corrupt JSON or SARIF output), and reports back over a pipe: a stage now and then ("importing",
"tracing GPT") and finally the result, as length-prefixed JSON — data only, so whatever user code
writes to that pipe can at worst make its own file's result wrong, never run code in reslint.
Neither child keeps the pipes and sockets it inherited (a process pool's), so a killed pool
worker is seen as dead by its pool at once.

Where `fork` does not exist (Windows) the function runs in-process, as before.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import json
import os
import select
import signal
import stat
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MAX_MESSAGE_BYTES = 64 << 20
STOP_GRACE_SECONDS = 5.0  # how long the keeper may take to kill the tree before it is killed itself
SIGNAL_POLL_SECONDS = 0.5  # the longest a wait on a child sleeps before Python's pending signal handlers run
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

_stage_writer: int | None = None  # the pipe to the parent, set in the worker
_running: set[int] = set()  # keepers of this process still running
_inline = False  # run_isolated calls run here (see inline): the caller is an isolated worker already
_delivered: list | None = None  # what `deliver` got while a call runs in this process


def report_stage(stage: str, line: int = 1, symbol: str = "") -> None:
    """Tell the parent what the child is doing (a no-op outside an isolated child)."""
    if _stage_writer is not None:
        _send(_stage_writer, {"kind": "stage", "stage": stage, "line": line, "symbol": symbol})


@dataclass(frozen=True)
class ChildFailure:
    """Why an isolated call returned no result, and what it was doing then."""

    cause: str  # "timed out after 10 s", "killed by signal 11 (SIGSEGV)", "exited with status 3"
    stage: str  # "importing the file", "tracing Net"
    line: int = 1
    symbol: str = ""


def run_isolated(function: Callable[..., Any], *args: Any, timeout: float | None) -> Any:
    """`function(*args)` in a forked child; its return value (JSON data: dicts, lists, strings,
    numbers), or a ChildFailure. Every process the call started has ended when it returns."""
    return run_isolated_then(function, *args, timeout=timeout, then_timeout=None)[0]


def run_isolated_then(function: Callable[..., Any], *args: Any, timeout: float | None,
                      then_timeout: float | None) -> tuple[Any, Any]:
    """run_isolated for a function that may `deliver` its result and go on with more work, which gets
    `then_timeout` more seconds: (the result or a ChildFailure, what the function returned after
    delivering or a ChildFailure saying why nothing came; None when it delivered nothing). A crash or hang
    after the delivery loses only the later work."""
    if not hasattr(os, "fork") or _inline:
        return _in_this_process(function, args)
    reader, writer = os.pipe()
    parent = os.getpid()
    # The child's collector would walk (and so copy, page by page) every object the parent holds:
    # torch's alone are a million. Frozen, they are not walked; the parent collects them again after.
    gc.freeze()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child, measured through the parent's view of it
        _keeper(function, args, reader, writer, parent)
    gc.unfreeze()
    os.close(writer)
    _running.add(pid)
    try:
        return _wait(pid, reader, timeout, then_timeout)
    finally:
        _running.discard(pid)
        os.close(reader)


def _in_this_process(function: Callable[..., Any], args: tuple) -> tuple[Any, Any]:
    global _delivered
    outer, _delivered = _delivered, []
    try:
        value = function(*args)
        return (_delivered[0], value) if _delivered else (value, None)
    finally:
        _delivered = outer


def deliver(value: Any) -> None:
    """In a function run by run_isolated_then: `value` is the call's result, sent now; the function goes
    on, and what it returns comes after."""
    if _delivered is not None:
        _delivered.append(value)
    elif _stage_writer is not None:
        _send(_stage_writer, {"kind": "delivered", "value": value})


@contextlib.contextmanager
def inline() -> Iterator[None]:
    """run_isolated runs its function in this process: for work an isolated worker does after delivering
    its result (the parent's time limit and a crash there lose only that work)."""
    global _inline
    outer, _inline = _inline, True
    try:
        yield
    finally:
        _inline = outer


def kill_running_children() -> None:
    """Stop every keeper still running, with its tree (a worker being stopped calls this before it exits)."""
    for pid in list(_running):
        _kill(pid)


# ----- in the keeper ---------------------------------------------------------------------------


def _keeper(function: Callable[..., Any], args: tuple, reader: int, writer: int, parent: int) -> None:
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us
        signal.signal(signal.SIGTERM, _stop_keeper)
        end_with_parent(signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before the line above
            os._exit(0)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        os.close(reader)
        _close_inherited_pipes(keep=writer)
        faulthandler.disable()
        worker = os.fork()
        if worker == 0:
            _worker(function, args, writer)
        status = _wait_for(worker)
        _kill_descendants()
        _send(writer, {"kind": "exited", "status": status})
    except BaseException:  # noqa: BLE001 - the keeper must end here, whatever happened
        _kill_descendants()
    finally:
        os._exit(0)


def _stop_keeper(signum, frame) -> None:
    _kill_descendants()
    os._exit(0)


def _wait_for(worker: int) -> int:
    """The worker's wait status, reaping the orphans re-parented to us meanwhile."""
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == worker:
            return status


def _kill_descendants() -> None:
    """SIGKILL every process below this one until none is left (orphans come back to us, the subreaper)."""
    for _ in range(10_000):
        children = _children()
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        if not children:
            time.sleep(0.001)


def _children() -> list[int]:
    own = os.getpid()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                found += [int(pid) for pid in handle.read().split()]
        except OSError:
            return _children_by_scan(own)
    return found


def _children_by_scan(own: int) -> list[int]:
    """Without /proc/PID/task/TID/children: every process whose parent is `own`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == own:
            found.append(int(entry))
    return found


def _close_inherited_pipes(keep: int) -> None:
    """Close the pipes and sockets inherited from the parent (a process pool's queues and sentinels)."""
    try:
        descriptors = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return
    for descriptor in descriptors:
        if descriptor <= 2 or descriptor == keep:
            continue
        try:
            mode = os.fstat(descriptor).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            try:
                os.close(descriptor)
            except OSError:
                pass


def end_with_parent(signum: int) -> None:
    """This process gets `signum` when the process that forked it ends (Linux; elsewhere nothing)."""
    _prctl(PR_SET_PDEATHSIG, signum)


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# ----- in the worker ---------------------------------------------------------------------------


def _worker(function: Callable[..., Any], args: tuple, writer: int) -> None:
    global _stage_writer
    status = 0
    try:
        end_with_parent(signal.SIGKILL)  # the keeper gone, nothing may run unwatched
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):
            os.dup2(devnull, stream)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _stage_writer = writer
        single_threaded_torch()
        value = function(*args)
        try:
            _send(writer, {"kind": "result", "value": value})
        except Exception as error:  # noqa: BLE001 - an unsendable result is reported, not hung on
            _send(writer, {"kind": "error", "cause": "returned a result that could not be sent back: "
                                                     f"{type(error).__name__}: {error}"})
    except BaseException as error:  # noqa: BLE001 - the worker must end here, whatever happened
        cause = f"called sys.exit({error.code!r})" if isinstance(error, SystemExit) else \
            f"raised {type(error).__name__}: {error}"
        try:
            _send(writer, {"kind": "error", "cause": cause})
        except BaseException:  # noqa: BLE001
            status = 70
    finally:
        os._exit(status)


def single_threaded_torch() -> None:
    """One intra-op thread in a forked worker: GNU OpenMP is not fork-safe, so once the parent has run a
    CPU op on its thread team (a warm-up, a probe, a test before), the child's first parallel CPU op (a
    LayerNorm on a CPU copy of the model) waits forever at the team barrier. With one thread torch
    never enters an OpenMP region (as DataLoader workers do)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _send(writer: int, message: dict) -> None:
    payload = json.dumps(message, allow_nan=False).encode("utf-8", "surrogatepass")
    data = struct.pack("<Q", len(payload)) + payload
    while data:
        written = os.write(writer, data)
        data = data[written:]


# ----- in the parent ---------------------------------------------------------------------------


def _wait(pid: int, reader: int, timeout: float | None, then_timeout: float | None) -> tuple[Any, Any]:
    deadline = None if timeout is None else time.monotonic() + timeout
    stage: tuple[str, int, str] = ("importing the file", 1, "")
    exit_status: int | None = None
    buffer = b""
    delivered: list = []  # the result, once delivered: what comes after is the later work's

    def ended(value: Any) -> tuple[Any, Any]:
        return (delivered[0], value) if delivered else (value, None)

    try:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                _kill(pid)
                return ended(ChildFailure(f"timed out after {(then_timeout if delivered else timeout):g} s", *stage))
            # In slices: a signal another thread of this process took runs its Python handler here only
            # between two waits (the SIGTERM that stops a worker, a Ctrl-C).
            ready, _, _ = select.select([reader], [], [], SIGNAL_POLL_SECONDS if remaining is None
                                        else min(remaining, SIGNAL_POLL_SECONDS))
            if not ready:
                continue
            chunk = os.read(reader, 1 << 16)
            if not chunk:  # the keeper and everything below it are gone: the worker's status says how
                keeper_status = _reap(pid)
                return ended(ChildFailure(_exit_cause(keeper_status if exit_status is None else exit_status), *stage))
            buffer += chunk
            while len(buffer) >= 8:
                size = struct.unpack("<Q", buffer[:8])[0]
                if size > MAX_MESSAGE_BYTES:
                    _kill(pid)
                    return ended(ChildFailure(f"sent a message of {size} bytes (the limit is {MAX_MESSAGE_BYTES})",
                                              *stage))
                if len(buffer) < 8 + size:
                    break
                message = _decode(buffer[8:8 + size])
                buffer = buffer[8 + size:]
                kind = message.get("kind")
                if kind == "stage":
                    stage = (str(message.get("stage")), _integer(message.get("line"), 1), str(message.get("symbol", "")))
                elif kind == "exited":
                    exit_status = _integer(message.get("status"), 0)
                elif kind == "delivered" and not delivered and then_timeout is not None:
                    delivered.append(message.get("value"))
                    deadline = time.monotonic() + then_timeout
                elif kind in ("result", "delivered"):
                    _kill(pid)  # the keeper ends the worker's leftovers before it exits
                    return ended(message.get("value"))
                else:
                    _kill(pid)
                    return ended(ChildFailure(str(message.get("cause", "sent a message reslint does not know")), *stage))
    except BaseException:  # KeyboardInterrupt included: never leave the child behind
        _kill(pid)
        raise


def _decode(payload: bytes) -> dict:
    try:
        message = json.loads(payload.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {"kind": "error", "cause": "sent a message that is not JSON"}
    return message if isinstance(message, dict) else {"kind": "error", "cause": "sent a message that is not an object"}


def _integer(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _kill(pid: int) -> None:
    """Stop the keeper: it kills its tree and exits; if it does not within the grace time, kill it."""
    # A second Ctrl-C or a SIGTERM must not interrupt the kill and leave the child running.
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return
            if done:
                return
            time.sleep(0.005)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
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
