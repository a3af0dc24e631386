"""The driver's ``/proc`` observations of a server process, on real processes (``cuda_gym.judge.driver``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cuda_gym.judge.driver import _children, _cpu_ticks

SPIN_THEN_EXIT = """
import threading, time, sys
def spin():
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass
t = threading.Thread(target=spin)
t.start(); t.join()
sys.stdout.write("joined\\n"); sys.stdout.flush()
time.sleep(30)
"""


def test_cpu_of_threads_that_exited_stays_in_the_process_count() -> None:
    """A helper thread's CPU must count after it exits (red team 2 r4: a relay of short-lived spinner threads
    hid from a sum over the live threads): the process's count less its main thread's keeps it."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN_THEN_EXIT], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "joined"
        time.sleep(0.05)
        assert os.listdir(f"/proc/{proc.pid}/task") == [str(proc.pid)]  # only the main thread is alive
        whole = _cpu_ticks(f"/proc/{proc.pid}/stat", children=True)
        main = _cpu_ticks(f"/proc/{proc.pid}/task/{proc.pid}/stat", children=False)
        assert whole is not None and main is not None
        assert (whole - main) / os.sysconf("SC_CLK_TCK") >= 0.2, (whole, main)
    finally:
        proc.kill()
        proc.wait()


def test_children_of_every_thread_are_listed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '30']); "
                               "print('up', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        kids = _children(parent.pid)
        assert len(kids) == 1 and open(f"/proc/{kids[0]}/comm").read().strip() == "sleep"
        assert _cpu_ticks("/proc/0/stat", children=True) is None  # unreadable: no reading, not zero
    finally:
        for pid in _children(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()
