"""The timing run's CPU diagnostics read real per-CPU counters: a process spinning on one CPU shows there."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from cuda_gym.judge import cpu_load

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")

SPIN = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 1.0:\n    pass\n"


def test_a_spinning_process_makes_its_cpu_busy_and_the_others_not() -> None:
    busy_cpu = min(os.sched_getaffinity(0))
    apart = sorted(os.sched_getaffinity(0) - cpu_load.smt_siblings(busy_cpu))  # not the spinner's core
    if not apart:
        pytest.skip("every CPU here shares the first one's core")
    quiet_cpu = apart[0]
    before = cpu_load.snapshot()
    subprocess.run([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{busy_cpu}}})\n{SPIN}"], check=True)
    after = cpu_load.snapshot()
    load = cpu_load.timing_load(before, after, [busy_cpu], cpu_load.smt_siblings(busy_cpu))
    assert load["cpu_timing_busy"] > 0.5, load
    assert 0.0 <= load["cpu_steal"] <= 1.0 and 0.0 <= load["cpu_timing_steal"] <= 1.0
    assert ("cpu_siblings_busy" in load) == (len(cpu_load.smt_siblings(busy_cpu)) > 1)  # only where SMT is
    # seen from the other CPU, the spinner is among "the others"
    other = cpu_load.timing_load(before, after, [quiet_cpu], cpu_load.smt_siblings(quiet_cpu))
    assert other["cpu_others_busy"] > 0.5, other


def test_siblings_include_the_cpu_and_an_interval_without_counts_is_empty() -> None:
    cpu = min(os.sched_getaffinity(0))
    assert cpu in cpu_load.smt_siblings(cpu)
    now = cpu_load.snapshot()
    assert now and all(t.total > 0 for t in now.values())
    assert cpu_load.timing_load(now, now, [cpu], [cpu]) == {}
    load = cpu_load.timing_load({}, now, [cpu], [cpu])
    assert load == {}
