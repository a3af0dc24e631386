"""What the machine's CPUs did while a server was timed: diagnostics of the trusted clock, never a verdict.

On the CPU the driver's round trip is CPU work on both sides; on a GPU the window is timed by the driver's
CUDA events, but the driver and the server still spin on two pinned CPUs (``driver.timing_cpus``) around
it. On the H200 (2026-12-02), under the earlier host-clock round trip, the CPU-side parts of real calls ran
about twice as long in some fresh servers as in others while the servers' no-op calibration did not
differ; what else ran beside the timing CPUs was not recorded. ``timing_load`` says it from
``/proc/stat`` (per-CPU jiffies, including the time a hypervisor took away, *steal*) over a timing run:
how busy the two timing CPUs, their SMT siblings and the other CPUs were.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """One CPU's counters from ``/proc/stat`` (jiffies since boot)."""

    busy: int
    idle: int
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def smt_siblings(cpu: int) -> set[int]:
    """The CPUs sharing ``cpu``'s physical core (SMT siblings), from sysfs; ``{cpu}`` when unknown."""
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return {cpu}
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.update(range(int(lo), int(hi or lo) + 1))
    return out | {cpu}


def snapshot() -> dict[int, CpuTimes]:
    """Every CPU's counters now; empty where ``/proc/stat`` cannot be read."""
    try:
        lines = _STAT.read_text().splitlines()
    except OSError:
        return {}
    out: dict[int, CpuTimes] = {}
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or not name[3:].isdigit() or len(fields) < 8:
            continue
        user, nice, system, idle, iowait, irq, softirq, steal = (int(f) for f in fields[:8])
        out[int(name[3:])] = CpuTimes(busy=user + nice + system + irq + softirq, idle=idle + iowait, steal=steal)
    return out


def timing_load(
    before: dict[int, CpuTimes], after: dict[int, CpuTimes], timing: Iterable[int], siblings: Iterable[int]
) -> dict[str, float]:
    """Shares of the interval between two snapshots (``cpu_`` diagnostics; empty if nothing was counted; the
    timing and sibling keys only where there are such CPUs).

    ``cpu_timing_busy`` / ``cpu_siblings_busy``: the mean busy share of the timing CPUs and of their SMT
    siblings (a busy sibling slows a timing CPU's core); ``cpu_others_busy``: how many other CPUs' worth of
    work ran; ``cpu_steal`` / ``cpu_timing_steal``: the share of all CPUs' / the timing CPUs' time the
    hypervisor took.
    """
    delta = {  # clamped at 0: a CPU's idle and iowait counts may step back
        cpu: CpuTimes(max(0, a.busy - b.busy), max(0, a.idle - b.idle), max(0, a.steal - b.steal))
        for cpu, a in after.items()
        if (b := before.get(cpu)) is not None
    }
    delta = {cpu: d for cpu, d in delta.items() if d.total > 0}
    if not delta:
        return {}
    timing_set = {c for c in timing if c in delta}
    sibling_set = {c for c in siblings if c in delta} - timing_set
    others = set(delta) - timing_set - sibling_set

    def mean_share(cpus: set[int], part: str) -> float:
        return sum(getattr(delta[c], part) / delta[c].total for c in cpus) / len(cpus)

    total = sum(d.total for d in delta.values())
    load = {
        "cpu_others_busy": sum(delta[c].busy / delta[c].total for c in others),
        "cpu_steal": sum(d.steal for d in delta.values()) / total,
    }
    if timing_set:  # left out, not NaN, where there is nothing to average (unpinned, no SMT)
        load["cpu_timing_busy"] = mean_share(timing_set, "busy")
        load["cpu_timing_steal"] = mean_share(timing_set, "steal")
    if sibling_set:
        load["cpu_siblings_busy"] = mean_share(sibling_set, "busy")
    return load
