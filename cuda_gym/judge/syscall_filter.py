"""A seccomp filter that the candidate server installs on itself before any submission code loads.

It refuses ``userfaultfd(2)`` (``EPERM``) to the server and to everything it starts (a filter is inherited
and cannot be removed). A submission that registered its output buffers with a userfault descriptor could
answer at once and compute each page only when the trusted driver's ``process_vm_readv`` touched it: the
sampled pages inside the window, every other page during the full copy after the clock stopped. Where the
host allows unprivileged userfaults in the kernel (``vm.unprivileged_userfaultfd = 1``) nothing else stops
that, and the driver's read would block until the server resolved the fault. The other way to a userfault
descriptor, ``/dev/userfaultfd``, is not in the sandbox's ``/dev`` (bwrap and unshare modes).

The filter is classic BPF (``SECCOMP_MODE_FILTER``), built here for x86-64 and aarch64; on another
architecture, or where the kernel refuses it, :func:`deny_userfaultfd` returns ``False`` and the server
says so in its log.
"""

from __future__ import annotations

import ctypes
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
_BPF_LD_W_ABS = 0x20
_BPF_JMP_JEQ_K = 0x15
_BPF_RET_K = 0x06
_ARCH = {  # machine -> (AUDIT_ARCH_*, userfaultfd's number, seccomp's number)
    "x86_64": (0xC000003E, 323, 317),
    "aarch64": (0xC00000B7, 282, 277),
}


def userfaultfd_filter(machine: str) -> bytes | None:
    """The filter program (``struct sock_filter`` array) for ``machine``, ``None`` where it is not built."""
    if machine not in _ARCH:
        return None
    arch, nr, _ = _ARCH[machine]
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JMP_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),  # another ABI (x32 and the like are not used by torch)
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JMP_JEQ_K, 0, 1, nr),
        (_BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        (_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *insn) for insn in program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_userfaultfd() -> bool:
    """Install the filter on every thread of the calling process (``SECCOMP_FILTER_FLAG_TSYNC``: threads that
    torch started already too; later threads and children inherit it); whether it is installed. Sets
    ``no_new_privs`` first (a sandboxed server has it already)."""
    machine = platform.machine()
    program = userfaultfd_filter(machine)
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    seccomp_nr = _ARCH[machine][2]
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(seccomp_nr), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)) == 0


def is_filtered(pid: int) -> bool:
    """Whether process ``pid`` runs under a seccomp filter (``/proc/<pid>/status``), read from outside it."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return any(line.split() == ["Seccomp:", "2"] for line in fh)
    except OSError:
        return False
