"""bounded.ctrl_c_deferred: a Ctrl-C during a clean-up comes once it is done. (A child
that will not stop on Ctrl-C: tests/integration/test_bounded_processes.py.)"""

from __future__ import annotations

import os
import signal
import time

import pytest

from hpcbench.core import bounded


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_during_a_deferred_clean_up_comes_once_it_is_done() -> None:
    before = signal.getsignal(signal.SIGINT)
    done = []
    with pytest.raises(KeyboardInterrupt), bounded.ctrl_c_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.1)  # Python runs the handler here: it only notes the press
        done.append("clean-up")
    assert done == ["clean-up"]
    assert signal.getsignal(signal.SIGINT) == before
    with bounded.ctrl_c_deferred():  # no press: nothing raised
        done.append("again")
