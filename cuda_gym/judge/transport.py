"""How the trusted driver and the candidate server exchange messages and tensor bytes.

- ``Channel``: one ``AF_UNIX`` ``SOCK_SEQPACKET`` socket pair end; one typed message
  (``cuda_gym.judge.messages``) per packet, file descriptors beside it (``SCM_RIGHTS``), the sender's
  PID translated by the kernel (``SCM_CREDENTIALS``, so the driver learns the host PID of a server
  inside a PID namespace). ``recv`` can spin (GPU: microsecond wake-ups) or block (CPU).
- CPU tensors: the driver's inputs live in a ``memfd`` arena both processes map (``HostArena``); the
  driver reads the candidate's outputs straight out of the candidate's address space with
  ``process_vm_readv`` (``RemoteMemory``): no copy is made by the candidate, and nothing it says about
  its outputs but their addresses is used.
- GPU tensors: every allocation of both sides' ``torch.cuda.MemPool`` is a VMM segment exportable as a
  POSIX fd (``vmm_pool.c``, ``DevicePool``); the other side imports and maps the segment (``PeerSegments``). This
  works across PID namespaces, where legacy CUDA IPC handles do not (probed on an H200:
  ``benchmarks/results/h200_2026-12-01/ipc_probe.json``).
"""

from __future__ import annotations

import array
import ctypes
import ctypes.util
import fcntl
import hashlib
import logging
import math
import mmap
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cuda_gym.errors import JudgeError, PeerGone, ProtocolError
from cuda_gym.fd_closer import close_fds
from cuda_gym.judge.messages import Segment, TensorRef, Value, decode, encode

log = logging.getLogger(__name__)

MAX_MESSAGE = 8 * 2**20
"""Largest message in bytes (output descriptors of thousands of tensors fit easily)."""
MAX_FDS = 64
"""Most file descriptors one message may carry (a message with more is refused)."""
SCM_MAX_FD = 253
"""Most file descriptors the kernel lets one message carry: a read makes room for all of them, because the
kernel drops what does not fit in the reader's own ``recvmsg``, and dropping the last reference to a file may
block there (a lingering socket, red team 6)."""

SCALAR_KINDS = {bool: "bool", int: "int", float: "float", str: "str", complex: "complex", type(None): "none"}


# ---------------------------------------------------------------------- channel


SPIN_S = 1.0
"""A spinning ``Channel`` spins this long in each wait, then blocks (its wake-up then costs 10-15 us)."""


class Channel:
    """One end of the driver <-> server socket pair.

    Args:
        sock: a connected ``AF_UNIX`` ``SOCK_SEQPACKET`` socket.
        spin: poll without sleeping for the first ``SPIN_S`` of each wait (GPU timing: the wake-up of a
            blocked read costs 10-15 us and varies; a spinning read answers in about 1 us), then block:
            a longer wait (a program loading, a server idle between evaluations) would burn a CPU and
            the driver's GIL for nothing.
    """

    def __init__(self, sock: socket.socket, spin: bool = False) -> None:
        self.sock = sock
        self.spin = spin
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.peer_pid: int | None = None

    @staticmethod
    def pair() -> tuple[socket.socket, socket.socket]:
        """A connected socket pair (driver end, server end)."""
        return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def send(self, msg: Any, fds: Sequence[int] = (), credentials: bool = False) -> None:
        """Send one message (with ``fds``; with this process's credentials when ``credentials``); ``msg``
        may be a message already ``encode``d (the driver encodes a call before its window opens)."""
        data = msg if isinstance(msg, bytes) else encode(msg)
        if len(data) > MAX_MESSAGE:
            raise ProtocolError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
        anc = []
        if fds:
            anc.append((socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes()))
        if credentials:
            anc.append((socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack("iII", os.getpid(), os.getuid(), os.getgid())))
        try:
            self.sock.sendmsg([data], anc)
        except OSError as exc:
            raise PeerGone(f"the channel is closed ({exc})") from None

    def recv(
        self, expected: Any = None, timeout_s: float | None = None, alive: Callable[[], bool] | None = None,
        with_fds: bool = False,
    ) -> tuple[Any, list[int]]:
        """The next message and the file descriptors that came with it.

        Raises ``PeerGone`` when the peer closed the channel, when ``timeout_s`` passed, or when
        ``alive()`` turns false while waiting; ``ProtocolError`` for a malformed message, and for one that
        carries file descriptors unless ``with_fds`` (descriptors belong only in the few messages that
        hand over memory: each descriptor a peer sends costs the closer's time, red team 8, B1).
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fd_bytes = socket.CMSG_SPACE(SCM_MAX_FD * 4) + socket.CMSG_SPACE(12)
        checks = 0
        spinning = self.spin
        spin_until = time.monotonic() + SPIN_S
        if spinning:
            # Non-blocking for real: a socket keeps the timeout of an earlier blocking read, and Python then
            # polls for that long before each read, MSG_DONTWAIT or not. With 0.5 s left from the Hello, a
            # "spinning" read waited 0.5 s per try and saw its deadline every 4096 tries: 34 minutes (an
            # H200 server hung in forward, or synchronizing before its answer, held the driver that long).
            self.sock.settimeout(0.0)
        while True:
            try:
                if spinning:
                    data, anc, flags, _ = self.sock.recvmsg(MAX_MESSAGE, fd_bytes, socket.MSG_DONTWAIT)
                else:
                    wait = 0.5 if deadline is None else max(0.0, min(0.5, deadline - time.monotonic()))
                    self.sock.settimeout(wait)
                    data, anc, flags, _ = self.sock.recvmsg(MAX_MESSAGE, fd_bytes)
                break
            except (TimeoutError, BlockingIOError):
                checks += 1
                if not spinning or checks % 4096 == 0:
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        raise PeerGone(f"no answer within {timeout_s:.1f} s") from None
                    if alive is not None and not alive():
                        raise PeerGone("the peer process ended") from None
                    spinning = spinning and now < spin_until
            except OSError as exc:
                raise PeerGone(f"the channel failed ({exc})") from None
        return self._message(data, anc, flags, expected, with_fds)

    def _message(
        self, data: bytes, anc: list[tuple[int, int, bytes]], flags: int, expected: Any, with_fds: bool
    ) -> tuple[Any, list[int]]:
        """The decoded message and its descriptors (closed when it is refused); the sender's credentials kept."""
        fds: list[int] = []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
            elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= 12:
                self.peer_pid = struct.unpack("iII", payload[:12])[0]
        try:  # the descriptors are ours now: a message that is refused must not keep them open
            if not data:
                raise PeerGone("the peer closed the channel")
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ProtocolError("a message or its file descriptors were truncated")
            if fds and not with_fds:
                raise ProtocolError(f"a message with {len(fds)} file descriptors where none belong")
            if len(fds) > MAX_FDS:
                raise ProtocolError(f"a message with {len(fds)} file descriptors (at most {MAX_FDS})")
            return decode(data, expected), fds
        except BaseException:
            close_fds(fds)
            raise

    def readable(self) -> bool:
        """Whether a message waits to be received (without taking it)."""
        try:
            poller = select.poll()  # not select(): it fails for descriptors above 1023
            poller.register(self.sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True  # a closed socket: the next ``recv`` says so

    def close(self) -> None:
        """Close the socket; its last reference is dropped on the closer's thread (``close_fds``): messages
        the peer sent and nobody read go with it, and with them the last references to the files they carry,
        whose release may block (a lingering socket, red team 6)."""
        close_fds([self.sock.detach()])  # -1 when it was closed already: skipped


# ---------------------------------------------------------------------- values


_PLAIN_INTEGERS = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                             torch.uint16, torch.uint32, torch.uint64})


def dtype_of(name: str) -> torch.dtype:
    """The torch dtype named ``name`` (``float32``); ``ProtocolError`` for anything else.

    Only plain element types travel: floating (float8 to float64), complex, integers and bool. Quantized,
    bit-packed and sub-byte types are refused: the driver cannot read their bytes safely (a ``qint8``
    ``frombuffer`` crashes the process), and no task's reference returns one.
    """
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ProtocolError(f"unknown dtype {name!r}")
    if not (dt.is_floating_point or dt.is_complex or dt in _PLAIN_INTEGERS):
        raise ProtocolError(f"dtype {name!r} cannot be passed (floating, complex, integer and bool tensors only)")
    return dt


def check_output_ref(ref: TensorRef, limit_bytes: int) -> int:
    """The bytes of the output ``ref`` describes, after checking that reading it stays bounded.

    ``ProtocolError`` when its elements take more than ``limit_bytes`` or the memory its strides span
    exceeds eight times its elements' bytes (plus 1 MiB): a slice of a padded buffer is fine; a
    stride that spans a terabyte, or a shape the driver would have to materialise beyond the task's
    outputs, is the server's failure before anything is read.
    """
    size = dtype_of(ref.dtype).itemsize
    if any(d < 0 for d in ref.shape):
        raise ProtocolError(f"an output with a negative dimension {ref.shape}")
    nbytes = math.prod(ref.shape) * size
    if nbytes > limit_bytes:
        raise ProtocolError(f"an output of {nbytes} bytes, more than the {limit_bytes} bytes this task's outputs may take")
    _, span = span_bytes(ref)
    if span > 8 * nbytes + 2**20:
        raise ProtocolError(f"an output whose strides span {span} bytes for {nbytes} bytes of elements")
    return nbytes


def to_value(obj: Any, tensor_ref: Callable[[torch.Tensor], TensorRef]) -> Value:
    """Describe an input or output structure; ``tensor_ref`` places each tensor's bytes."""
    if isinstance(obj, torch.Tensor):
        return Value("tensor", tensor=tensor_ref(obj))
    if type(obj) in (tuple, list):
        return Value(type(obj).__name__, items=tuple(to_value(v, tensor_ref) for v in obj))
    if type(obj) is dict:
        return Value("dict", keys=tuple(str(k) for k in obj), items=tuple(to_value(v, tensor_ref) for v in obj.values()))
    kind = SCALAR_KINDS.get(type(obj))
    if kind is None:
        raise ProtocolError(
            f"cannot pass an object of type {type(obj).__name__} (tensors, tuples, lists, dicts and scalars only)"
        )
    if kind == "complex":
        return Value(kind, scalar=[obj.real, obj.imag])
    return Value(kind, scalar=obj)


def from_value(value: Value, tensor: Callable[[TensorRef], torch.Tensor]) -> Any:
    """Rebuild a structure from its description; ``tensor`` maps each ``TensorRef`` to a tensor."""
    kind = value.kind
    if kind == "tensor":
        if value.tensor is None:
            raise ProtocolError("a tensor value without its reference")
        return tensor(value.tensor)
    if kind in ("tuple", "list"):
        items = [from_value(v, tensor) for v in value.items]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        if len(value.keys) != len(value.items):
            raise ProtocolError("a dict value whose keys and items differ in number")
        return {k: from_value(v, tensor) for k, v in zip(value.keys, value.items)}
    if kind == "none":
        return None
    if kind == "complex":
        re_im = value.scalar
        if not (isinstance(re_im, list) and len(re_im) == 2):
            raise ProtocolError("a complex value must be [re, im]")
        return complex(float(re_im[0]), float(re_im[1]))
    kinds: dict[str, type | tuple[type, ...]] = {"bool": bool, "int": int, "float": (int, float), "str": str}
    expect = kinds.get(kind)
    if expect is None or not isinstance(value.scalar, expect) or (kind != "bool" and isinstance(value.scalar, bool)):
        raise ProtocolError(f"a {kind!r} value holding {type(value.scalar).__name__}")
    scalar: Any = value.scalar
    return float(scalar) if kind == "float" else scalar


def tensor_leaves(value: Value) -> list[TensorRef]:
    """Every tensor reference of a structure, in order."""
    if value.kind == "tensor" and value.tensor is not None:
        return [value.tensor]
    return [t for v in value.items for t in tensor_leaves(v)]


def span_bytes(ref: TensorRef) -> tuple[int, int]:
    """``(first byte, bytes)`` of the memory a strided view touches, relative to its ``base``."""
    size = dtype_of(ref.dtype).itemsize
    if any(s < 0 for s in ref.strides) or len(ref.shape) != len(ref.strides) or ref.offset < 0:
        raise ProtocolError("tensor references need non-negative strides and offset, one stride per dimension")
    if any(d == 0 for d in ref.shape):
        return ref.offset * size, 0
    last = ref.offset + sum((d - 1) * s for d, s in zip(ref.shape, ref.strides))
    return ref.offset * size, (last - ref.offset + 1) * size


def view(flat: torch.Tensor, ref: TensorRef) -> torch.Tensor:
    """The tensor ``ref`` describes, as a view of the byte tensor ``flat`` (which starts at ``base``)."""
    dt = dtype_of(ref.dtype)
    start, nbytes = span_bytes(ref)
    if start + nbytes > flat.numel():
        raise ProtocolError(
            f"a tensor reference reaches {start + nbytes} bytes past its base, beyond the {flat.numel()} shared"
        )
    if nbytes == 0:
        return torch.empty(ref.shape, dtype=dt, device=flat.device)
    if start % dt.itemsize:
        raise ProtocolError("a tensor reference is not aligned to its element size")
    typed = flat[: (flat.numel() // dt.itemsize) * dt.itemsize].view(dt)
    # as_strided's offset counts from the start of the storage, not of the view
    return typed.as_strided(ref.shape, ref.strides, typed.storage_offset() + ref.offset)


# ---------------------------------------------------------------------- CPU: arena and remote reads


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides (in elements) of ``shape``."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


class HostArena:
    """A ``memfd`` region both processes map: the driver writes each call's inputs into it.

    ``reserve`` hands out aligned ranges for tensors after the header (``reset`` before each call); ``flat``
    is the whole region as a ``uint8`` tensor; ``tensor`` is the view a reference describes. The header's
    first 8 bytes are the release word: the driver writes a call's ``seq`` there once its clock runs
    (``release``), and the server, which said ``Armed``, spins on it (``released``): a word in shared
    memory, like the GPU's, so that no message has to be woken for, read and decoded inside the window.
    """

    ALIGN = 256
    HEADER = 256
    """Bytes before the first input: the release word (an ``int64`` at offset 0), the rest unused."""

    def __init__(self, size: int, fd: int | None = None) -> None:
        self.size = max(int(size), mmap.PAGESIZE)
        self.owned = fd is None
        """Whether the arena made its fd (the driver's): then :meth:`close` closes it too."""
        if fd is None:
            fd = os.memfd_create("cuda_gym_inputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, self.size)
            # Sealed before the server gets it: a server that shrank it would make the driver's next
            # input copy fault (SIGBUS) in the trusted process.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.fd = fd
        self.map = mmap.mmap(fd, self.size)
        self.flat = torch.frombuffer(self.map, dtype=torch.uint8)
        self.word = ctypes.c_int64.from_buffer(self.map)
        self.top = self.HEADER

    def reset(self) -> None:
        """Start placing inputs after the header again."""
        self.top = self.HEADER

    def release(self, seq: int) -> None:
        """Driver: call ``seq`` may run (an aligned 8-byte store: the server never reads half of it)."""
        self.word.value = seq

    def released(self) -> int:
        """Server: the last call released."""
        return self.word.value

    def reserve(self, t: torch.Tensor) -> tuple[torch.Tensor, TensorRef]:
        """The arena view (contiguous, not written yet) and its reference, where a copy of ``t`` goes next."""
        src = t.detach()
        nbytes = src.numel() * src.element_size()
        start = -(-self.top // self.ALIGN) * self.ALIGN
        if start + nbytes > self.size:
            raise JudgeError(f"the input arena of {self.size} bytes is too small for {start + nbytes}: a bug in its sizing")
        self.top = start + nbytes
        ref = TensorRef(
            dtype=str(src.dtype).replace("torch.", ""),
            shape=tuple(src.shape),
            strides=contiguous_strides(tuple(src.shape)),
            offset=0,
            segment=0,
            base=start,
        )
        return view(self.flat[start:], ref), ref

    def tensor(self, ref: TensorRef) -> torch.Tensor:
        """The arena tensor ``ref`` describes."""
        if ref.segment != 0 or ref.base < self.HEADER or ref.base > self.size:
            raise ProtocolError("an input reference outside the arena's inputs")
        return view(self.flat[ref.base :], ref)

    def close(self) -> None:
        """Unmap, and close the fd when the arena made it (a received fd stays with its owner).

        The driver makes one arena per session: left open, every evaluation kept its inputs' memory in
        the long-lived worker."""
        try:
            del self.flat
            del self.word
            self.map.close()
        except (BufferError, ValueError, AttributeError):  # pragma: no cover - a view still alive, closed twice
            pass
        if self.owned and self.fd >= 0:
            close_fds([self.fd])
            self.fd = -1


class _IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _LIBC.process_vm_readv.restype = ctypes.c_ssize_t
    return _LIBC


class RemoteMemory:
    """Reads bytes out of another process's address space (``process_vm_readv``), without its help."""

    IOV_MAX = 1024

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def read(self, address: int, nbytes: int) -> bytearray:
        """``nbytes`` bytes at ``address`` of the process; ``OSError`` when they cannot be read."""
        out = bytearray(nbytes)
        if nbytes == 0:
            return out
        buf = (ctypes.c_char * nbytes).from_buffer(out)
        done = 0
        while done < nbytes:
            chunk = min(nbytes - done, 1 << 30)
            local = _IOVec(ctypes.addressof(buf) + done, chunk)
            remote = _IOVec(address + done, chunk)
            n = _libc().process_vm_readv(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
            if n <= 0:
                err = ctypes.get_errno()
                raise OSError(err, f"process_vm_readv of {chunk} bytes at {address + done:#x}: {os.strerror(err)}")
            done += n
        return out

    def read_tensor(self, ref: TensorRef) -> torch.Tensor:
        """A copy (on the CPU) of the tensor ``ref`` describes, read from the process."""
        start, nbytes = span_bytes(ref)
        raw = self.read(ref.base + start, nbytes)
        flat = torch.frombuffer(raw, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        shifted = TensorRef(ref.dtype, ref.shape, ref.strides, 0, ref.segment, 0)
        return view(flat, shifted).clone() if nbytes else torch.empty(ref.shape, dtype=dtype_of(ref.dtype))

    def gather(self, ref: TensorRef, positions: Sequence[int]) -> torch.Tensor:
        """The elements at flat ``positions`` (row-major over ``shape``) of the tensor ``ref`` describes.

        Inside the CPU window (the sample read): the addresses and both ``iovec`` arrays are computed as int64
        arrays, not per element in Python (a quarter of a millisecond less per call, all of it clock noise
        and time that a server answering before its work is done would have to finish in)."""
        dt = dtype_of(ref.dtype)
        size = dt.itemsize
        k = len(positions)
        out = bytearray(size * k)
        if k == 0:
            return torch.empty(0, dtype=dt)
        rest = np.fromiter(positions, dtype=np.int64, count=k)
        offsets = np.full(k, ref.offset, dtype=np.int64)
        for extent, stride in zip(reversed(ref.shape), reversed(ref.strides)):
            rest, index = np.divmod(rest, extent)
            offsets += index * stride
        remote = np.empty((k, 2), dtype=np.uint64)
        remote[:, 0] = offsets * size + ref.base
        remote[:, 1] = size
        local = np.empty((k, 2), dtype=np.uint64)
        start = ctypes.addressof((ctypes.c_char * len(out)).from_buffer(out))
        local[:, 0] = np.arange(start, start + size * k, size, dtype=np.uint64)
        local[:, 1] = size
        step = ctypes.sizeof(_IOVec)
        for lo in range(0, k, self.IOV_MAX):
            n = min(self.IOV_MAX, k - lo)
            got = _libc().process_vm_readv(self.pid, ctypes.c_void_p(local.ctypes.data + lo * step), n,
                                           ctypes.c_void_p(remote.ctypes.data + lo * step), n, 0)
            if got != size * n:
                err = ctypes.get_errno()
                raise OSError(err, f"process_vm_readv of sampled elements: {os.strerror(err)}")
        return torch.frombuffer(out, dtype=dt).clone()


# ---------------------------------------------------------------------- GPU: VMM segments


_SHIM_SOURCE = Path(__file__).with_name("vmm_pool.c")


def vmm_pool_library(cache_root: Path) -> Path:
    """The compiled ``vmm_pool.c`` (built once per source hash with the host C compiler, atomically)."""
    source = _SHIM_SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = cache_root / "judge" / "vmm_pool" / f"vmm_pool_{digest}.so"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    cc = os.environ.get("CC") or "cc"
    proc = subprocess.run(
        [cc, "-O2", "-shared", "-fPIC", str(_SHIM_SOURCE), "-o", str(tmp), "-ldl", "-lpthread"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise JudgeError(f"cannot build the judge's GPU memory shim with {cc}: {proc.stderr[-1000:]}; install a C compiler")
    os.replace(tmp, target)
    os.chmod(target, 0o755)
    return target


class _Loc(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _Access(ctypes.Structure):
    _fields_ = [("location", _Loc), ("flags", ctypes.c_int)]


class _CudaArray:
    """An object with ``__cuda_array_interface__`` over raw device bytes (``torch.as_tensor`` wraps it)."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 3,
            "strides": None,
        }


class DevicePool:
    """This process's exportable GPU memory: a ``torch.cuda.MemPool`` whose every segment is a VMM
    allocation that can be handed to another process as a POSIX fd.

    Args:
        library: the compiled ``vmm_pool.c``.
        device: ``cuda:N``.
    """

    def __init__(self, library: Path, device: str) -> None:
        self.device = torch.device(device)
        self.lib = ctypes.CDLL(str(library))
        self.lib.cg_lookup.restype = ctypes.c_int
        self.lib.cg_lookup.argtypes = [
            ctypes.c_uint64,
            ctypes.c_uint64,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64),
        ]
        self.lib.cg_export.restype = ctypes.c_int
        self.lib.cg_export.argtypes = [ctypes.c_int]
        allocator = torch.cuda.memory.CUDAPluggableAllocator(str(library), "cg_alloc", "cg_free")
        self.pool = torch.cuda.MemPool(allocator.allocator())

    def use(self) -> Any:
        """A context manager routing this thread's CUDA allocations to the exportable pool."""
        return torch.cuda.use_mem_pool(self.pool, self.device)

    def ref_of(self, t: torch.Tensor, sent: set[int]) -> tuple[TensorRef, Segment | None, int]:
        """Describe a pool tensor: its reference, and the segment and fd to send unless it is in ``sent``
        (the segments this peer already has; the segment's id is added to it).

        Raises ``LookupError`` when the tensor's memory is not in the pool.
        """
        nbytes = t.untyped_storage().nbytes()
        base = ctypes.c_uint64()
        size = ctypes.c_uint64()
        start = t.untyped_storage().data_ptr()
        seg = self.lib.cg_lookup(start, max(nbytes, 1), ctypes.byref(base), ctypes.byref(size))
        if seg < 0:
            raise LookupError("not in the shared pool")
        ref = TensorRef(
            dtype=str(t.dtype).replace("torch.", ""),
            shape=tuple(t.shape),
            strides=tuple(t.stride()),
            offset=int(t.storage_offset()),
            segment=seg,
            base=start - base.value,
        )
        if seg in sent:
            return ref, None, -1
        fd = self.lib.cg_export(seg)
        if fd < 0:
            raise JudgeError("cannot export a shared GPU segment (cuMemExportToShareableHandle failed)")
        sent.add(seg)
        return ref, Segment(seg, size.value), fd


class _Memcpy2D(ctypes.Structure):
    """``CUDA_MEMCPY2D`` of the driver API."""

    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t),
        ("srcY", ctypes.c_size_t),
        ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p),
        ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t),
        ("dstY", ctypes.c_size_t),
        ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p),
        ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t),
        ("Height", ctypes.c_size_t),
    ]


@dataclass(frozen=True)
class Probe:
    """Where a sample of an output's bytes is read: ``rows`` pieces of ``width`` bytes, ``pitch`` apart,
    from device address ``address`` (one piece when the output is small: its whole span)."""

    address: int
    width: int
    pitch: int
    rows: int

    @property
    def nbytes(self) -> int:
        """Bytes the probe reads."""
        return self.width * self.rows


PROBE_ROWS, PROBE_WIDTH = 256, 16
"""A probe reads 256 pieces of 16 bytes spread over the output (all of it when that is smaller)."""


class PeerSegments:
    """The other process's GPU segments, imported from their fds and mapped here (one per peer)."""

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)
        self.index = self.device.index or 0
        self.mapped: dict[int, torch.Tensor] = {}
        self._maps: list[tuple[int, int, int, _CudaArray]] = []  # (ptr, size, handle, holder)
        self.cu = _libcuda()

    def attach(self, segments: Sequence[Segment], fds: Sequence[int]) -> None:
        """Import and map the peer's new segments (one fd each, in order); the fds are closed."""
        if len(segments) != len(fds):
            close_fds(fds)
            raise ProtocolError(f"{len(segments)} segments announced with {len(fds)} file descriptors")
        try:
            for seg, fd in zip(segments, fds):
                if seg.id in self.mapped or seg.size <= 0 or seg.size > 1 << 40:
                    raise ProtocolError(f"segment {seg.id} announced twice or with a bad size")
                self.mapped[seg.id] = self._map(fd, seg.size)
        finally:  # every fd of the message, also those after a segment that failed (each may hold GPU memory)
            close_fds(fds)

    def _map(self, fd: int, size: int) -> torch.Tensor:
        cu = self.cu
        handle = ctypes.c_uint64()
        _cu_check(
            cu.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), 1), "cuMemImportFromShareableHandle"
        )
        ptr = ctypes.c_uint64()
        undo: list[Callable[[], Any]] = [lambda: cu.cuMemRelease(ctypes.c_uint64(handle.value))]
        try:  # a size the peer lied about fails here: whatever was taken is given back (the peer's memory too)
            _cu_check(
                cu.cuMemAddressReserve(
                    ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(0), ctypes.c_uint64(0)
                ),
                "cuMemAddressReserve",
            )
            undo.append(lambda: cu.cuMemAddressFree(ctypes.c_uint64(ptr.value), ctypes.c_size_t(size)))
            _cu_check(cu.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_uint64(0)), "cuMemMap")
            undo.append(lambda: cu.cuMemUnmap(ctypes.c_uint64(ptr.value), ctypes.c_size_t(size)))
            acc = _Access(_Loc(1, self.index), 3)
            _cu_check(cu.cuMemSetAccess(ptr, ctypes.c_size_t(size), ctypes.byref(acc), ctypes.c_size_t(1)),
                      "cuMemSetAccess")
        except BaseException:
            for step in reversed(undo):
                step()
            raise
        holder = _CudaArray(ptr.value, size)
        self._maps.append((ptr.value, size, handle.value, holder))
        return torch.as_tensor(holder, device=self.device)

    def tensor(self, ref: TensorRef) -> torch.Tensor:
        """The peer's tensor ``ref`` describes, as a view of its mapped segment (an empty one has no
        memory, and no segment: the server sends segment -1)."""
        if span_bytes(ref)[1] == 0:
            return torch.empty(ref.shape, dtype=dtype_of(ref.dtype), device=self.device)
        flat = self.mapped.get(ref.segment)
        if flat is None:
            raise ProtocolError(f"a tensor in segment {ref.segment}, which was never shared")
        if not 0 <= ref.base <= flat.numel():
            raise ProtocolError("a tensor reference outside its segment")
        return view(flat[ref.base :], ref)

    def probe(self, ref: TensorRef, phase: int, jitter: int) -> Probe:
        """A probe over the bytes the output ``ref`` spans, placed by two secret random numbers: pieces at a
        pitch between half and all of the span / ``PROBE_ROWS``, starting at a random phase (an empty output:
        a probe that reads nothing)."""
        if span_bytes(ref)[1] == 0:
            return Probe(0, 0, 0, 1)
        flat = self.mapped.get(ref.segment)
        if flat is None:
            raise ProtocolError(f"an output in segment {ref.segment}, which was never shared")
        start, nbytes = span_bytes(ref)
        if ref.base < 0 or ref.base + start + nbytes > flat.numel():
            raise ProtocolError("an output reference reaches past its segment")
        address = flat.data_ptr() + ref.base + start
        if nbytes <= PROBE_ROWS * PROBE_WIDTH:
            return Probe(address, nbytes, nbytes, 1)
        widest = (nbytes - PROBE_WIDTH) // (PROBE_ROWS - 1)
        pitch = max(PROBE_WIDTH, widest // 2 + jitter % (widest - widest // 2 + 1))
        slack = nbytes - PROBE_WIDTH - (PROBE_ROWS - 1) * pitch
        return Probe(address + phase % (slack + 1), PROBE_WIDTH, pitch, PROBE_ROWS)

    def read(self, probe: Probe, into: torch.Tensor, stream: int | None = None) -> torch.Tensor:
        """The probe's bytes, copied by the GPU's copy engine into pinned host memory ``into`` (a ``uint8``
        tensor of at least ``probe.nbytes``): no kernel of ours runs, so the GPU's compute engine stays in
        the server's context. Returns the filled part of ``into``: at once, or, with ``stream`` (a raw
        ``CUstream``), once that stream has reached the copy (it is enqueued there)."""
        if probe.nbytes == 0:
            return into[:0]
        copy = _Memcpy2D()
        copy.srcMemoryType, copy.srcDevice, copy.srcPitch = 2, probe.address, probe.pitch  # CU_MEMORYTYPE_DEVICE
        copy.dstMemoryType, copy.dstHost, copy.dstPitch = 1, into.data_ptr(), probe.width  # CU_MEMORYTYPE_HOST
        copy.WidthInBytes, copy.Height = probe.width, probe.rows
        if stream is None:
            _cu_check(self.cu.cuMemcpy2D_v2(ctypes.byref(copy)), "cuMemcpy2D")
        else:
            _cu_check(self.cu.cuMemcpy2DAsync_v2(ctypes.byref(copy), ctypes.c_void_p(stream)), "cuMemcpy2DAsync")
        return into[: probe.nbytes]

    def close(self) -> None:
        """Unmap every imported segment (after synchronizing: no work of ours may still read them)."""
        if not self._maps:
            return
        torch.cuda.synchronize(self.device)
        self.mapped.clear()
        cu = self.cu
        for ptr, size, handle, _ in self._maps:
            cu.cuMemUnmap(ctypes.c_uint64(ptr), ctypes.c_size_t(size))
            cu.cuMemAddressFree(ctypes.c_uint64(ptr), ctypes.c_size_t(size))
            cu.cuMemRelease(ctypes.c_uint64(handle))
        self._maps.clear()


_CU: Any = None


def _libcuda() -> Any:
    global _CU
    if _CU is None:
        _CU = ctypes.CDLL("libcuda.so.1")
    return _CU


def _cu_check(result: int, what: str) -> None:
    if result != 0:
        raise JudgeError(
            f"{what} failed (CUresult {result}): the judge's processes cannot share GPU memory or synchronize through it"
        )


EAGER_MODULES_ENV = {"CUDA_MODULE_LOADING": "EAGER"}
"""The environment of a process that times GPU calls (``modules_load_eagerly``)."""


def modules_load_eagerly() -> bool:
    """Whether this process's CUDA driver loaded every module when its context was made
    (``cuModuleGetLoadingMode``; ``CUDA_MODULE_LOADING=EAGER`` before CUDA starts).

    A driver queues each GPU window behind a gate it opens once the window is all queued
    (``driver.ServerSession._call_gpu``). Lazily loaded, a kernel's module is loaded at its first launch, and
    that load may wait for the whole context (CUDA programming guide, "Lazy Loading", potential hazards),
    the gated stream included: the launch never returned and the first window hung (an H100 on 2026-12-05,
    the first baseline on the H200 on 2026-12-02)."""
    query = getattr(_libcuda(), "cuModuleGetLoadingMode", None)
    if query is None:
        return True  # a driver older than CUDA 11.7: no lazy loading
    mode = ctypes.c_int(0)
    _cu_check(query(ctypes.byref(mode)), "cuModuleGetLoadingMode")
    return mode.value == 1  # CU_MODULE_EAGER_LOADING


RELEASE_WORD, DONE_WORD, FLAG_WORDS = 0, 16, 32
"""The int32 words of a session's flags (``StreamFlags``): the release (written by the driver's stream), the
done word (written by the server's stream), 64 bytes apart; the flags tensor holds ``FLAG_WORDS``."""
_WAIT_GEQ, _WAIT_EQ = 0x0, 0x1  # CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_EQ


class StreamFlags:
    """Release and done words in GPU memory both processes map, written and waited on by their streams
    (``cuStreamWriteValue32`` / ``cuStreamWaitValue32``).

    The server enqueues, for call ``seq``: a wait until the release word reaches ``seq``, the call's work,
    a write of ``seq`` to the done word; the driver's stream copies the inputs, writes the release word and
    waits until the done word *equals* ``seq``, and the driver's CUDA events around this time the call on
    the GPU's own clock, in the driver's context (measured on an H200, 2026-12-02: server to server the
    median of a 0.39 ms kernel so timed moved by 0.06%; ``benchmarks/results/h200_2026-12-02_s9/``).

    Args:
        address: device address of the flags (``FLAG_WORDS`` int32 words) in this process.
    """

    def __init__(self, address: int) -> None:
        self.address = address
        self.cu = _libcuda()

    def wait(self, stream: int, word: int, value: int, equal: bool = False) -> None:
        """Make ``stream`` (a raw ``CUstream``) wait until ``word`` reaches ``value`` (equals it, ``equal``)."""
        _cu_check(
            self.cu.cuStreamWaitValue32_v2(
                ctypes.c_void_p(stream),
                ctypes.c_uint64(self.address + 4 * word),
                ctypes.c_uint32(value),
                ctypes.c_uint(_WAIT_EQ if equal else _WAIT_GEQ),
            ),
            "cuStreamWaitValue32",
        )

    def write(self, stream: int, word: int, value: int) -> None:
        """Make ``stream`` write ``value`` to ``word`` once its earlier work is done (with a memory fence)."""
        _cu_check(
            self.cu.cuStreamWriteValue32_v2(
                ctypes.c_void_p(stream), ctypes.c_uint64(self.address + 4 * word), ctypes.c_uint32(value), ctypes.c_uint(0)
            ),
            "cuStreamWriteValue32",
        )


def own_stream(device: str, blocking: bool) -> torch.cuda.ExternalStream:
    """A new stream of its own (``cuStreamCreate``; torch's ``Stream()`` hands out streams from a pool of 32,
    which two callers may share). ``blocking``: it synchronizes with the legacy default stream (without
    ``CU_STREAM_NON_BLOCKING``): a kernel a submission launches on stream 0 (``<<<grid, block>>>``) then
    waits for this stream's earlier work, and this stream's later work waits for that kernel."""
    torch.zeros(1, device=device)  # the primary context is current on this thread
    handle = ctypes.c_void_p()
    flags = 0 if blocking else 1  # CU_STREAM_NON_BLOCKING
    _cu_check(_libcuda().cuStreamCreate(ctypes.byref(handle), ctypes.c_uint(flags)), "cuStreamCreate")
    return torch.cuda.ExternalStream(handle.value or 0, device=torch.device(device))


def reset_persisting_l2() -> None:
    """Return persisting L2 lines to normal and set the persisting carve-out to 0 (no-op without a GPU)."""
    try:
        cu = _libcuda()
    except OSError:
        return
    cu.cuCtxSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(0))  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    cu.cuCtxResetPersistingL2Cache()
