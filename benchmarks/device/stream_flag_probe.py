"""Probe (H200): can a trusted driver release pre-enqueued GPU work in another process through flag words
in GPU memory both map (``cuStreamWaitValue32`` / ``cuStreamWriteValue32``), and how stable is release to
done measured by the driver's own CUDA events (and by its CPU clock), server process to server process?

    python3 benchmarks/device/stream_flag_probe.py [servers] [calls]   -> JSON on stdout, progress on stderr

Each server process (``torch.multiprocessing`` spawn; the flags travel by CUDA IPC, no sandbox) enqueues on
a side stream, for every call, a wait on the release word, its work, and a write of the done word; the
driver's side stream copies 256 MiB of inputs with a kernel, flushes the L2, records an event, writes the
release word, waits for the done word and records an event. Work kinds: ``noop`` (one tiny kernel) and
``mem`` (an elementwise pass over 256 MiB). The judge's version of this is ``transport.StreamFlags``.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import statistics
import sys
import time

import torch
import torch.multiprocessing as mp

RELEASE, DONE, ARMED = 0, 16, 32  # int32 word indices in the page (64-byte apart)
N_ELEMS = 64 * 2**20  # 256 MiB of float32


def cuda_lib() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuMemHostRegister_v2", "cuMemHostGetDevicePointer_v2", "cuStreamWaitValue32_v2", "cuStreamWriteValue32_v2"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def register(lib: ctypes.CDLL, page: mmap.mmap) -> tuple[int, int]:
    torch.zeros(1, device="cuda")  # makes the primary context current for the driver API
    buf = (ctypes.c_char * len(page)).from_buffer(page)
    host = ctypes.addressof(buf)
    rc = lib.cuMemHostRegister_v2(ctypes.c_void_p(host), ctypes.c_size_t(len(page)), ctypes.c_uint(0x1 | 0x2))
    if rc:
        raise RuntimeError(f"cuMemHostRegister failed: {rc}")
    dev = ctypes.c_uint64()
    rc = lib.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), ctypes.c_void_p(host), ctypes.c_uint(0))
    if rc:
        raise RuntimeError(f"cuMemHostGetDevicePointer failed: {rc}")
    return host, dev.value


def wait_value(lib: ctypes.CDLL, dev: int, word: int, value: int) -> None:
    s = torch.cuda.current_stream().cuda_stream
    addr, val = ctypes.c_uint64(dev + 4 * word), ctypes.c_uint32(value)
    rc = lib.cuStreamWaitValue32_v2(ctypes.c_void_p(s), addr, val, ctypes.c_uint(0))
    if rc:
        raise RuntimeError(f"cuStreamWaitValue32 failed: {rc}")


def write_value(lib: ctypes.CDLL, dev: int, word: int, value: int) -> None:
    s = torch.cuda.current_stream().cuda_stream
    addr, val = ctypes.c_uint64(dev + 4 * word), ctypes.c_uint32(value)
    rc = lib.cuStreamWriteValue32_v2(ctypes.c_void_p(s), addr, val, ctypes.c_uint(0))
    if rc:
        raise RuntimeError(f"cuStreamWriteValue32 failed: {rc}")


def server(flags: torch.Tensor, kind: str, calls: int, result: mp.Queue[dict[str, float]]) -> None:
    import faulthandler

    faulthandler.dump_traceback_later(20, exit=True)
    lib = cuda_lib()
    stream = torch.cuda.Stream()
    dev = flags.data_ptr()
    words = torch.zeros(64, dtype=torch.int32).pin_memory()
    x = torch.randn(N_ELEMS, device="cuda")
    tick = torch.zeros(1, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    events = []
    with torch.cuda.stream(stream):
        for seq in range(1, calls + 1):
            wait_value(lib, dev, RELEASE, seq)
            start.record()
            if kind == "noop":
                tick.add_(1.0)
            else:
                y = torch.relu(x * 2.0 + 1.0)
            end.record()
            write_value(lib, dev, DONE, seq)
            write_value(lib, dev, ARMED, seq)  # not used: the driver releases after a pause
            if seq == 1:
                print("server: enqueued 1", file=sys.stderr, flush=True)
            stream.synchronize()
            faulthandler.dump_traceback_later(20, exit=True)
            events.append(start.elapsed_time(end))
            if kind != "noop":
                del y
    del words
    result.put({"event_median_ms": statistics.median(events[calls // 4 :])})


def driver_run(kind: str, calls: int) -> dict[str, float]:
    lib = cuda_lib()
    flags = torch.zeros(64, dtype=torch.int32, device="cuda")
    dev = flags.data_ptr()
    stream = torch.cuda.Stream()
    private = torch.randn(N_ELEMS, device="cuda")
    shared = torch.empty_like(private)
    flush = torch.empty(64 * 2**20, dtype=torch.int32, device="cuda")
    ctx = mp.get_context("spawn")
    q: mp.Queue[dict[str, float]] = ctx.Queue()
    proc = ctx.Process(target=server, args=(flags, kind, calls, q))
    proc.start()
    time.sleep(8)  # the server is up and has enqueued call 1
    trips, gpu, copy_ms = [], [], []
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        for seq in range(1, calls + 1):
            time.sleep(0.001)  # the server enqueues call seq meanwhile
            t0 = time.perf_counter()
            torch.bitwise_or(private.view(torch.int32), 0, out=shared.view(torch.int32))
            flush.fill_(0x5A5A)
            e0.record()
            write_value(lib, dev, RELEASE, seq)
            wait_value(lib, dev, DONE, seq)
            e1.record()
            deadline = time.monotonic() + 20
            while not e1.query():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no done for call {seq}")
            trips.append((time.perf_counter() - t0) * 1000)
            gpu.append(e0.elapsed_time(e1))
        info = q.get(timeout=60)
        proc.join(30)
        for _ in range(50):
            t0 = time.perf_counter()
            torch.bitwise_or(private.view(torch.int32), 0, out=shared.view(torch.int32))
            flush.fill_(0x5A5A)
            e1.record()
            while not e1.query():
                pass
            copy_ms.append((time.perf_counter() - t0) * 1000)
    body, gbody = trips[calls // 4 :], gpu[calls // 4 :]
    q3 = statistics.quantiles(body, n=4)
    return {
        "median_ms": statistics.median(body),
        "q1_ms": q3[0],
        "q3_ms": q3[2],
        "gpu_median_ms": statistics.median(gbody),
        "gpu_q1_ms": statistics.quantiles(gbody, n=4)[0],
        "driver_part_ms": statistics.median(copy_ms),
        **info,
    }


def main() -> None:
    servers = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    torch.cuda.init()
    results: dict[str, list[dict[str, float]]] = {"noop": [], "mem": []}
    for _ in range(servers):
        for kind in ("noop", "mem"):
            results[kind].append(driver_run(kind, calls))
            print(kind, results[kind][-1], file=sys.stderr, flush=True)
    summary: dict[str, object] = {}
    for key in ("median_ms", "gpu_median_ms"):
        for kind, rs in results.items():
            vals = [r[key] for r in rs]
            summary[f"{kind}_{key}"] = {"values": vals, "max_over_min": max(vals) / min(vals)}
        net = [m[key] - n[key] for m, n in zip(results["mem"], results["noop"])]
        summary[f"net_{key}"] = {"values": net, "max_over_min": max(net) / min(net)}
    print(json.dumps({"summary": summary, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
