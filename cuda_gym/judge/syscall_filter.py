"""A seccomp filter that the candidate server installs on itself before any submission code loads.

It refuses ``userfaultfd(2)`` (``EPERM``) to the server and to everything it starts (a filter is inherited
and cannot be removed). A submission that registered its output buffers with a userfault descriptor could
answer at once and compute each page only when the trusted driver's ``process_vm_readv`` touched it: the
sampled pages inside the window, every other page during the full copy after the clock stopped. Where the
host allows unprivileged userfaults in the kernel (``vm.unprivileged_userfaultfd = 1``) nothing else stops
that, and the driver's read would block until the server resolved the fault. The other way to a userfault
descriptor, ``/dev/userfaultfd``'s ``ioctl``, is refused too.

The filter is classic BPF (``SECCOMP_MODE_FILTER``), built here for x86-64 and aarch64; on another
architecture, or where the kernel refuses it, :func:`deny_userfaultfd` returns ``False`` and the server
says so in its ``Hello`` (``filtered``), read before any submission code ran; the driver then warns.
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
_BPF_JMP_JGE_K = 0x35
_BPF_RET_K = 0x06
_ARCH = {  # machine -> (AUDIT_ARCH_*, userfaultfd's number, seccomp's number, ioctl's number)
    "x86_64": (0xC000003E, 323, 317, 16),
    "aarch64": (0xC00000B7, 282, 277, 29),
}
USERFAULTFD_IOC_NEW = 0xAA00
"""``ioctl`` request of ``/dev/userfaultfd`` that makes a userfault descriptor (``_IO(0xAA, 0x00)``)."""


X32_SYSCALL_BIT = 0x40000000
"""x86-64's x32 ABI: its syscall numbers carry this bit (``userfaultfd`` is ``0x40000000 | 323`` there)."""


def userfaultfd_filter(machine: str) -> bytes | None:
    """The filter program (``struct sock_filter`` array) for ``machine``, ``None`` where it is not built.

    Every syscall of another ABI fails (``EPERM``): a 64-bit process may still enter the kernel through the
    32-bit one (``int $0x80`` on x86-64, where ``userfaultfd`` is number 374, or AArch32 compat on arm64) and
    so would pass a filter that checks numbers only; nothing the server runs needs those ABIs. On x86-64 the
    x32 numbers (``X32_SYSCALL_BIT``) fail too, and so does the ``ioctl`` that makes a userfault descriptor
    from ``/dev/userfaultfd`` (``USERFAULTFD_IOC_NEW``, whatever the descriptor: the sandbox's ``limits`` mode
    shows the host's ``/dev``)."""
    if machine not in _ARCH:
        return None
    arch, nr, _, ioctl = _ARCH[machine]
    deny = SECCOMP_RET_ERRNO | EPERM
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # 0: seccomp_data.arch
        (_BPF_JMP_JEQ_K, 1, 0, arch),  # 1
        (_BPF_RET_K, 0, 0, deny),  # 2: another ABI
        (_BPF_LD_W_ABS, 0, 0, 0),  # 3: seccomp_data.nr
        (_BPF_JMP_JGE_K, 5, 0, X32_SYSCALL_BIT if machine == "x86_64" else 0xFFFFFFFF),  # 4: x32 -> 10
        (_BPF_JMP_JEQ_K, 4, 0, nr),  # 5: userfaultfd -> 10
        (_BPF_JMP_JEQ_K, 0, 2, ioctl),  # 6: not ioctl -> 9
        (_BPF_LD_W_ABS, 0, 0, 24),  # 7: the low word of seccomp_data.args[1], the request
        (_BPF_JMP_JEQ_K, 1, 0, USERFAULTFD_IOC_NEW),  # 8: -> 10
        (_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),  # 9
        (_BPF_RET_K, 0, 0, deny),  # 10
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

