"""A seccomp filter that the candidate server installs on itself before any submission code loads.

It refuses, to the server and to everything it starts (a filter is inherited and cannot be removed):

- ``userfaultfd(2)`` (``EPERM``). A submission that registered its output buffers with a userfault
  descriptor could answer at once and compute each page only when the trusted driver's ``process_vm_readv``
  touched it: the sampled pages inside the window, every other page during the full copy after the clock
  stopped. Where the host allows unprivileged userfaults in the kernel (``vm.unprivileged_userfaultfd = 1``)
  nothing else stops that, and the driver's read would block until the server resolved the fault. The other
  way to a userfault descriptor, ``/dev/userfaultfd``'s ``ioctl``, is refused too.
- new namespaces and joining others (``server_filter``): kernel work they hold outlives every process the
  judge accounts for.

The filter is classic BPF (``SECCOMP_MODE_FILTER``), built here for x86-64 and aarch64; on another
architecture, or where the kernel refuses it, :func:`restrict_syscalls` returns ``False`` and the server
says so in its ``Hello`` (``filtered``), read before any submission code ran; the driver then warns.
"""

from __future__ import annotations

import ctypes
import errno
import platform

from cuda_gym.seccomp_bpf import (
    ARCHES,
    BPF_JMP_JEQ_K,
    BPF_JMP_JGE_K,
    BPF_LD_W_ABS,
    BPF_RET_K,
    NAMESPACE_FLAGS_CHECK,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    X32_SYSCALL_BIT,
    Instruction,
    assemble,
    namespace_rules,
)

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
USERFAULTFD_IOC_NEW = 0xAA00
"""``ioctl`` request of ``/dev/userfaultfd`` that makes a userfault descriptor (``_IO(0xAA, 0x00)``)."""

__all__ = ["X32_SYSCALL_BIT", "restrict_syscalls", "server_filter"]


def server_filter(machine: str) -> bytes | None:
    """The filter program (``struct sock_filter`` array) for ``machine``, ``None`` where it is not built.

    Refused (``EPERM``):
    - ``userfaultfd``, and the ``ioctl`` that makes a userfault descriptor from ``/dev/userfaultfd``
      (``USERFAULTFD_IOC_NEW``, whatever the descriptor: the sandbox's ``limits`` mode shows the host's ``/dev``);
    - new namespaces (``unshare`` or ``clone`` with a ``CLONE_NEW*`` flag) and ``setns``: a child in a nested
      user namespace pinned 12,000 network namespaces, whose teardown after the kill took seconds of kernel
      CPU that no account of the server's held, while the judge went on timing (red team 6, X2). ``clone3``
      passes its flags in memory a filter cannot read: it fails with ``ENOSYS``, and the C library then
      falls back to ``clone`` (threads and ``fork`` go on working);
    - every syscall of another ABI: a 64-bit process may still enter the kernel through the 32-bit one
      (``int $0x80`` on x86-64, where ``userfaultfd`` is number 374, or AArch32 compat on arm64) and so would
      pass a filter that checks numbers only; nothing the server runs needs those ABIs. On x86-64 the x32
      numbers (``X32_SYSCALL_BIT``) fail too."""
    if machine not in ARCHES:
        return None
    n = ARCHES[machine]
    # (opcode, jump if true, jump if false, k): jumps name labels, resolved by assemble
    program: list[Instruction | str] = [
        (BPF_LD_W_ABS, "", "", 4),  # seccomp_data.arch
        (BPF_JMP_JEQ_K, "nr", "deny", n.audit),
        "nr",
        (BPF_LD_W_ABS, "", "", 0),  # seccomp_data.nr
        (BPF_JMP_JGE_K, "deny", "", n.other_abi),
        (BPF_JMP_JEQ_K, "deny", "", n.userfaultfd),
        *namespace_rules(n),
        (BPF_JMP_JEQ_K, "", "allow", n.ioctl),
        (BPF_LD_W_ABS, "", "", 24),  # the low word of seccomp_data.args[1]: ioctl's request
        (BPF_JMP_JEQ_K, "deny", "allow", USERFAULTFD_IOC_NEW),
        *NAMESPACE_FLAGS_CHECK,
        "allow",
        (BPF_RET_K, "", "", SECCOMP_RET_ALLOW),
        "deny",
        (BPF_RET_K, "", "", SECCOMP_RET_ERRNO | errno.EPERM),
        "nosys",
        (BPF_RET_K, "", "", SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    return assemble(program)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def restrict_syscalls() -> bool:
    """Install the filter (``server_filter``) on every thread of the calling process
    (``SECCOMP_FILTER_FLAG_TSYNC``: threads that torch started already too; later threads and children
    inherit it); whether it is installed. Sets ``no_new_privs`` first (a sandboxed server has it already)."""
    machine = platform.machine()
    program = server_filter(machine)
    if program is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(ARCHES[machine].seccomp), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog)) == 0
