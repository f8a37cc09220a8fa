"""The static engine's deep-stack thread: one per process, serving every file's analysis.

libcst's visitors recurse a few frames per nesting level, so each analysis runs on a thread with a
large stack and a high recursion limit. One thread is kept for the process (a thread started per file
cost every file fresh page faults); these tests pin what that must not break: the same thread serves
each call, errors reach the caller, a call made from inside an analysis does not wait on itself, and a
forked worker starts its own thread instead of queueing work for its parent's.
"""

from __future__ import annotations

import multiprocessing
import sys
import threading

import pytest

import reslint.analysis
from reslint.analysis import RECURSION_LIMIT, on_deep_stack


@pytest.fixture(autouse=True)
def fresh_thread_after_each_test():
    """A test that failed by blocking the thread leaves the next ones a fresh thread, not a hang."""
    yield
    reslint.analysis._deep_stack.__init__()


def where_and_limit() -> tuple[int, int]:
    return threading.get_ident(), sys.getrecursionlimit()


def test_one_thread_serves_every_call_with_the_deep_recursion_limit():
    first, limit = on_deep_stack(where_and_limit)
    second, _ = on_deep_stack(where_and_limit)
    assert first == second != threading.get_ident()
    assert limit >= RECURSION_LIMIT
    assert sys.getrecursionlimit() < RECURSION_LIMIT  # restored for the caller


def test_an_error_reaches_the_caller_and_the_thread_serves_on():
    def fails() -> None:
        raise ValueError("no such layer")

    with pytest.raises(ValueError, match="no such layer"):
        on_deep_stack(fails)
    assert on_deep_stack(lambda: 7) == 7


def test_a_call_from_inside_an_analysis_runs_in_place():
    answer: list = []
    caller = threading.Thread(target=lambda: answer.append(on_deep_stack(on_deep_stack, where_and_limit)), daemon=True)
    caller.start()
    caller.join(timeout=60)
    assert not caller.is_alive(), "a nested call waited for the thread it runs on"
    assert answer[0][0] == on_deep_stack(where_and_limit)[0]


def thread_in_child() -> tuple[int, bool]:
    ident, _ = on_deep_stack(where_and_limit)
    return ident, ident != threading.get_ident()


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_worker_starts_its_own_thread():
    parent, _ = on_deep_stack(where_and_limit)  # the parent's thread exists before the fork
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child, on_other_thread = pool.apply_async(thread_in_child).get(timeout=60)
    assert on_other_thread
    assert on_deep_stack(where_and_limit)[0] == parent
