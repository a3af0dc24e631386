"""The driver's ``/proc`` observations of a server process, on real processes (``cuda_gym.judge.driver``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cuda_gym.judge.driver import _cpu_ticks, _process_runtime_ns, _thread_runtime_ns, helper_runtime_ns
from cuda_gym.process_stop import children

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
        until = time.monotonic() + 5  # join() returns before the OS thread left the kernel's task list
        while os.listdir(f"/proc/{proc.pid}/task") != [str(proc.pid)] and time.monotonic() < until:
            time.sleep(0.01)
        assert os.listdir(f"/proc/{proc.pid}/task") == [str(proc.pid)]  # only the main thread is alive
        helpers = helper_runtime_ns(proc.pid)
        assert helpers is not None
        assert 0.29 <= helpers / 1e9 < 0.4, helpers
    finally:
        proc.kill()
        proc.wait()


def test_children_of_every_thread_are_listed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '30']); "
                               "print('up', flush=True); time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "up"
        kids = children(parent.pid)
        assert len(kids) == 1
        # Popen returns once the child began its exec, which renames it a moment later (python3 until then)
        until = time.monotonic() + 5
        while open(f"/proc/{kids[0]}/comm").read().strip() != "sleep" and time.monotonic() < until:
            time.sleep(0.01)
        assert open(f"/proc/{kids[0]}/comm").read().strip() == "sleep"
        assert _cpu_ticks("/proc/0/stat", children=True) is None  # unreadable: no reading, not zero
        assert helper_runtime_ns(2**22 + 1) is None and _process_runtime_ns(2**22 + 1) is None
        assert _thread_runtime_ns(0, 0) is None
    finally:
        for pid in children(parent.pid):
            os.kill(pid, 9)
        parent.kill()
        parent.wait()


MAIN_SPINS = """
import threading, sys, time
threading.Thread(target=threading.Event().wait, daemon=True).start()  # a helper that never runs
sys.stdout.write("up\\n"); sys.stdout.flush()
end = time.monotonic() + 30
while time.monotonic() < end:
    pass
"""


def test_a_spinning_main_thread_leaves_no_phantom_helper_cpu() -> None:
    """The driver reads the server's helper CPU (process less main thread) around every idle window, 800
    per evaluation of a short GPU task, while the main thread spins: the readings must be exact, or their
    rounding adds up (clock ticks gave honest servers 0.04-0.29 s on the H200, a ``background-work``)."""
    proc = subprocess.Popen([sys.executable, "-c", MAIN_SPINS], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"

        def helper_ns() -> int:
            helpers = helper_runtime_ns(proc.pid)
            assert helpers is not None
            return helpers

        total = 0
        for _ in range(800):
            before = helper_ns()
            time.sleep(0.0005)
            total += helper_ns() - before
        assert abs(total) / 1e9 < 0.005, total
    finally:
        proc.kill()
        proc.wait()
