"""Probe: which ways of sharing GPU memory work between a trusted process and a sandboxed one.

Run on a GPU machine as root: ``python3 benchmarks/device/ipc_probe.py OUT.json``. For each isolation
(none, ``unshare --mount``, ``unshare --pid --fork``), checks legacy CUDA IPC (torch's storage sharing)
in both directions and VMM memory exported as a POSIX file descriptor (``cuMemExportToShareableHandle``)
passed to the child, and measures pipe and shared-memory doorbell round trips.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import subprocess
import sys
import time

CHILD = r"""
import ctypes, json, mmap, os, sys, time
import torch
mode = sys.argv[1]
torch.cuda.init(); torch.zeros(1, device="cuda")
sys.path.insert(0, os.path.dirname(sys.argv[2]))
import ipc_probe as P
if mode == "legacy_import":
    args = [bytes.fromhex(v) if k == "b" else v for k, v in json.loads(sys.stdin.readline())]
    st = torch.UntypedStorage._new_shared_cuda(*args)
    t = torch.empty(0, dtype=torch.float32, device="cuda").set_(st, 0, (4,), (1,))
    print(json.dumps({"values": t.tolist()}), flush=True)
elif mode == "legacy_export":
    t = torch.arange(4, dtype=torch.float32, device="cuda") + 10
    torch.cuda.synchronize()
    h = [("b", x.hex()) if isinstance(x, bytes) else ("v", x) for x in t.untyped_storage()._share_cuda_()]
    print(json.dumps({"handle": h}), flush=True)
    sys.stdin.readline()
elif mode == "vmm_import":
    fd = int(sys.argv[3]); size = int(sys.argv[4])
    ptr = P.vmm_import(fd, size)
    t = P.wrap(ptr, size // 4)
    vals = t[:4].tolist()
    t[:4] = torch.tensor([7.0, 8.0, 9.0, 10.0], device="cuda"); torch.cuda.synchronize()
    print(json.dumps({"values": vals}), flush=True)
elif mode == "doorbell":
    fd = int(sys.argv[3])
    m = mmap.mmap(fd, 4096)
    r, w = int(sys.argv[4]), int(sys.argv[5])
    # pipe round trips
    for _ in range(200):
        os.read(r, 1); os.write(w, b"x")
    # spin doorbell: byte 0 written by parent with seq, byte 8 echoed
    last = 0
    for _ in range(2000):
        while True:
            s = int.from_bytes(m[0:8], "little")
            if s != last:
                break
        last = s
        m[8:16] = s.to_bytes(8, "little")
"""

CU = None


def cu():
    global CU
    if CU is None:
        CU = ctypes.CDLL("libcuda.so.1")
    return CU


class Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class Prop(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", Loc),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", AllocFlags),
    ]


class Access(ctypes.Structure):
    _fields_ = [("location", Loc), ("flags", ctypes.c_int)]


def _ck(r, what):
    if r != 0:
        raise RuntimeError(f"{what} failed: CUresult {r}")


def _prop(dev=0):
    p = Prop()
    p.type = 1  # PINNED
    p.requestedHandleTypes = 1  # POSIX_FILE_DESCRIPTOR
    p.location = Loc(1, dev)
    return p


def granularity(dev=0):
    g = ctypes.c_size_t()
    _ck(cu().cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(_prop(dev)), 0), "granularity")
    return g.value


def _map(handle, size, dev=0):
    ptr = ctypes.c_uint64()
    _ck(
        cu().cuMemAddressReserve(
            ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)
        ),
        "reserve",
    )
    _ck(cu().cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_uint64(0)), "map")
    acc = Access(Loc(1, dev), 3)
    _ck(cu().cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(acc), ctypes.c_size_t(1)), "access")
    return ptr.value


def vmm_create(size, dev=0):
    h = ctypes.c_uint64()
    _ck(cu().cuMemCreate(ctypes.byref(h), ctypes.c_size_t(size), ctypes.byref(_prop(dev)), ctypes.c_uint64(0)), "create")
    fd = ctypes.c_int()
    _ck(cu().cuMemExportToShareableHandle(ctypes.byref(fd), h, 1, ctypes.c_uint64(0)), "export")
    return _map(h, size, dev), fd.value


def vmm_import(fd, size, dev=0):
    h = ctypes.c_uint64()
    _ck(cu().cuMemImportFromShareableHandle(ctypes.byref(h), ctypes.c_void_p(fd), 1), "import")
    return _map(h, size, dev)


def wrap(ptr, n):
    import torch

    class A:
        __cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "data": (ptr, False), "version": 3, "strides": None}

    return torch.as_tensor(A(), device="cuda")


WRAPS = {
    "none": [],
    "mount": ["unshare", "--mount", "--"],
    "pid": ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--"],
}


def child(wrapper, mode, *extra, pass_fds=()):
    return subprocess.Popen(
        [*WRAPS[wrapper], sys.executable, "-c", CHILD, mode, os.path.abspath(__file__), *map(str, extra)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        pass_fds=pass_fds,
    )


def main(out_path):
    import torch

    torch.cuda.init()
    torch.zeros(1, device="cuda")
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    for w in WRAPS:
        r = {}
        # parent exports, child imports
        try:
            t = torch.arange(4, dtype=torch.float32, device="cuda") + 1
            torch.cuda.synchronize()
            h = [("b", x.hex()) if isinstance(x, bytes) else ("v", x) for x in t.untyped_storage()._share_cuda_()]
            p = child(w, "legacy_import")
            o, e = p.communicate(json.dumps(h) + "\n", timeout=120)
            r["legacy_parent_to_child"] = o.strip()[-300:] or e.strip()[-600:]
        except Exception as exc:
            r["legacy_parent_to_child"] = f"error {exc}"
        # child exports, parent imports
        try:
            p = child(w, "legacy_export")
            line = p.stdout.readline()
            h = [bytes.fromhex(v) if k == "b" else v for k, v in json.loads(line)["handle"]]
            try:
                st = torch.UntypedStorage._new_shared_cuda(*h)
                t = torch.empty(0, dtype=torch.float32, device="cuda").set_(st, 0, (4,), (1,))
                r["legacy_child_to_parent"] = str(t.tolist())
            except Exception as exc:
                r["legacy_child_to_parent"] = f"error {exc}"[:600]
            p.stdin.write("\n")
            p.stdin.flush()
            p.wait(timeout=60)
        except Exception as exc:
            r["legacy_child_to_parent"] = f"error {exc} {p.stderr.read()[-600:]}"
        # VMM fd
        try:
            size = granularity()
            t0 = time.perf_counter()
            ptr, fd = vmm_create(size)
            r["vmm_create_ms"] = (time.perf_counter() - t0) * 1000
            t = wrap(ptr, size // 4)
            t[:4] = torch.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
            torch.cuda.synchronize()
            p = child(w, "vmm_import", fd, size, pass_fds=(fd,))
            o, e = p.communicate("", timeout=120)
            torch.cuda.synchronize()
            r["vmm"] = (o.strip()[-300:] or e.strip()[-600:]) + f" parent sees {t[:4].tolist()}"
        except Exception as exc:
            r["vmm"] = f"error {exc}"
        # doorbells
        try:
            fd = os.memfd_create("bell")
            os.ftruncate(fd, 4096)
            m = mmap.mmap(fd, 4096)
            r1, w1 = os.pipe()
            r2, w2 = os.pipe()
            p = child(w, "doorbell", fd, r1, w2, pass_fds=(fd, r1, w2))
            pipe = []
            for _ in range(200):
                t0 = time.perf_counter()
                os.write(w1, b"x")
                os.read(r2, 1)
                pipe.append((time.perf_counter() - t0) * 1e6)
            spin = []
            for s in range(1, 2001):
                t0 = time.perf_counter()
                m[0:8] = s.to_bytes(8, "little")
                while int.from_bytes(m[8:16], "little") != s:
                    pass
                spin.append((time.perf_counter() - t0) * 1e6)
            p.wait(timeout=60)
            pipe.sort()
            spin.sort()
            r["pipe_rtt_us"] = {"p10": pipe[20], "median": pipe[100], "p90": pipe[180], "max": pipe[-1]}
            r["spin_rtt_us"] = {"p10": spin[200], "median": spin[1000], "p90": spin[1800], "max": spin[-1]}
        except Exception as exc:
            r["doorbell"] = f"error {exc}"
        res[w] = r
        print(w, json.dumps(r), flush=True)
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ipc_probe.json")
