"""After training: an abort in gloo's teardown after the last metric line counts, a crash before
it stays a crash; ranks ended as stuck count as finished in launch's exit code (literal inputs)."""
from __future__ import annotations

import signal

import pytest

from autotune.export.launch import exit_code
from autotune.run.classify import abort_in_teardown
from autotune.run.idle import Stuck

ABRT = -signal.SIGABRT
TEARDOWN = "terminate called without an active exception\n"


@pytest.mark.parametrize("codes, after, tails, signalled, counts", [
    # nanoGPT's case: rank 0 printed its last iteration, then gloo aborted in teardown
    ((ABRT, -signal.SIGTERM), "\nsaving checkpoint to out\n" + TEARDOWN, ["", ""], (1,), True),
    ((ABRT, 0), TEARDOWN, ["", ""], (), True),
    ((0, ABRT), "", ["", "step 9\n" + TEARDOWN], (), True),
    # no metric line at all: the abort cannot be placed after the training
    ((ABRT, 0), None, ["", ""], (), False),
    # an error after the last metric line is the training's own crash
    ((ABRT, 0), "\nTraceback (most recent call last):\nRuntimeError: boom\n", ["", ""], (), False),
    ((ABRT, 0), "terminate called after throwing an instance of 'c10::Error'\n", ["", ""], (),
     False),
    ((0, ABRT), "", ["", "what():  bad alloc\n" + TEARDOWN], (), False),
    # another rank failed on its own, or the failure was not an abort
    ((ABRT, 3), TEARDOWN, ["", ""], (), False),
    ((-signal.SIGSEGV, 0), TEARDOWN, ["", ""], (), False),
    ((0, 0), "", ["", ""], (), False),
])
def test_abort_after_the_last_metric_line_counts(codes, after, tails, signalled, counts):
    note = abort_in_teardown(codes, tails, rank0_after_last_metric=after, signalled=signalled)
    assert (note is not None) == counts, note
    if counts:
        assert "SIGABRT after rank 0's last metric line (in teardown)" in note


def test_ended_ranks_count_as_finished_in_the_exit_code():
    assert exit_code((0, -signal.SIGTERM), (1,), ended=(1,)) == 0
    assert exit_code((3, -signal.SIGTERM), (1,), ended=(1,)) == 3
    assert exit_code((0, -signal.SIGTERM), (1,)) == 128 + signal.SIGTERM


def test_stuck_message_names_the_rank_the_wait_and_where():
    s = Stuck(rank=1, idle_s=30.2, after_rank=0, where="futex_wait_queue x3")
    assert s.message == "rank 1 idle for 30 s after rank 0 exited; ended (it sat in futex_wait_queue x3)"
    assert Stuck(rank=2, idle_s=5, after_rank=1).message.endswith("ended")
