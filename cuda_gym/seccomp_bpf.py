"""Classic BPF programs for ``seccomp(2)``: the assembler, and the filter every sandboxed command runs under.

:func:`assemble` turns a list of instructions with named jump labels into a ``struct sock_filter`` array.
:func:`sandbox_filter` is the program the sandbox's prelude installs before the command (``Sandbox``): it
refuses the kernel key syscalls (``add_key``, ``request_key``, ``keyctl``), new namespaces and every syscall of
another ABI.
Keys outlive the sandbox in the kernel: a sandbox that opened its user keyring to every uid, or took the write
right from it so that no clear could empty it, passed data and a used-up key quota to later sandboxes
(red team 9, K1, and its recheck). Nothing a sandboxed command needs uses keys.
"""

from __future__ import annotations

import errno
import functools
import struct
from dataclasses import dataclass

SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20
BPF_JMP_JEQ_K = 0x15
BPF_JMP_JGE_K = 0x35
BPF_JMP_JSET_K = 0x45
BPF_RET_K = 0x06

X32_SYSCALL_BIT = 0x40000000
"""x86-64's x32 ABI: its syscall numbers carry this bit (``userfaultfd`` is ``0x40000000 | 323`` there)."""

Instruction = tuple[int, str, str, int]
"""(opcode, label if true, label if false, k); an empty label is the next instruction."""


@dataclass(frozen=True)
class Arch:
    """One architecture's ``AUDIT_ARCH_*``, the number above which its other ABI lies, and the syscall numbers
    the filters look at."""

    audit: int
    other_abi: int
    seccomp: int
    keys: tuple[int, int, int]
    """``add_key``, ``request_key``, ``keyctl``."""
    unshare: int
    setns: int
    clone: int
    clone3: int
    userfaultfd: int
    ioctl: int


ARCHES = {
    "x86_64": Arch(0xC000003E, other_abi=X32_SYSCALL_BIT, seccomp=317, keys=(248, 249, 250), unshare=272, setns=308,
                   clone=56, clone3=435, userfaultfd=323, ioctl=16),
    "aarch64": Arch(0xC00000B7, other_abi=0xFFFFFFFF, seccomp=277, keys=(217, 218, 219), unshare=97, setns=268,
                    clone=220, clone3=435, userfaultfd=282, ioctl=29),
}

NAMESPACE_FLAGS = 0x7E020080
"""Every ``CLONE_NEW*`` flag: ``NEWTIME`` 0x80, ``NEWNS`` 0x20000, ``NEWCGROUP``, ``NEWUTS``, ``NEWIPC``,
``NEWUSER``, ``NEWPID``, ``NEWNET`` (0x02000000-0x40000000). 0x80 lies in ``clone``'s exit-signal byte, which no
signal number reaches."""


def namespace_rules(a: Arch) -> list[Instruction | str]:
    """Instructions, with ``seccomp_data.nr`` loaded, that refuse new namespaces and joining others: ``setns``
    jumps to ``deny``; ``unshare`` and ``clone`` to ``namespaces``, which checks their flags (``deny`` for any
    ``CLONE_NEW*``, else ``allow``); ``clone3``, whose flags lie in memory a filter cannot read, to ``nosys``
    (``ENOSYS``: the C library falls back to ``clone``, so threads and ``fork`` go on working). The caller's
    program holds :data:`NAMESPACE_FLAGS_CHECK` and, after it (classic BPF jumps only forward), ``allow``,
    ``deny`` and ``nosys``."""
    return [
        (BPF_JMP_JEQ_K, "deny", "", a.setns),
        (BPF_JMP_JEQ_K, "namespaces", "", a.unshare),
        (BPF_JMP_JEQ_K, "namespaces", "", a.clone),
        (BPF_JMP_JEQ_K, "nosys", "", a.clone3),
    ]


NAMESPACE_FLAGS_CHECK: list[Instruction | str] = [
    "namespaces",
    (BPF_LD_W_ABS, "", "", 16),  # the low word of seccomp_data.args[0]: unshare's or clone's flags
    (BPF_JMP_JSET_K, "deny", "allow", NAMESPACE_FLAGS),
]
"""The ``namespaces`` label of :func:`namespace_rules`."""


def assemble(program: list[Instruction | str]) -> bytes:
    """The ``struct sock_filter`` array of ``program``: a string in it is a label for the next instruction."""
    labels: dict[str, int] = {}
    insns: list[Instruction] = []
    for item in program:
        if isinstance(item, str):
            labels[item] = len(insns)
        else:
            insns.append(item)

    def jump(label: str, at: int) -> int:
        offset = 0 if not label else labels[label] - at - 1
        if not 0 <= offset <= 255:
            raise ValueError(f"seccomp program: the jump to {label!r} at {at} goes back or past 255 instructions")
        return offset

    return b"".join(struct.pack("=HBBI", op, jump(jt, i), jump(jf, i), k) for i, (op, jt, jf, k) in enumerate(insns))


@functools.cache
def sandbox_filter(machine: str) -> bytes | None:
    """The sandbox's filter for ``machine``, ``None`` where none is built. Refused (``EPERM``): the key
    syscalls, new namespaces and joining others (:func:`namespace_rules`), and every syscall of another ABI,
    which would reach the same calls by other numbers.

    Namespaces: the sandbox's watchdog counts the processes of the sandbox's own PID namespace, so six 200 MiB
    processes in a nested one ran under a 512 MiB limit (red team 10, F4); and a nested user namespace pinned
    thousands of network namespaces, whose teardown after the sandbox ended cost kernel CPU charged to no
    sandbox (red team 6, X2, and 10, F3)."""
    if machine not in ARCHES:
        return None
    a = ARCHES[machine]
    program: list[Instruction | str] = [
        (BPF_LD_W_ABS, "", "", 4),  # seccomp_data.arch
        (BPF_JMP_JEQ_K, "nr", "deny", a.audit),
        "nr",
        (BPF_LD_W_ABS, "", "", 0),  # seccomp_data.nr
        (BPF_JMP_JGE_K, "deny", "", a.other_abi),
        *[(BPF_JMP_JEQ_K, "deny", "", nr) for nr in a.keys],
        *namespace_rules(a),
        (BPF_RET_K, "", "", SECCOMP_RET_ALLOW),
        *NAMESPACE_FLAGS_CHECK,  # jumps go forward only: allow again below
        "allow",
        (BPF_RET_K, "", "", SECCOMP_RET_ALLOW),
        "deny",
        (BPF_RET_K, "", "", SECCOMP_RET_ERRNO | errno.EPERM),
        "nosys",
        (BPF_RET_K, "", "", SECCOMP_RET_ERRNO | errno.ENOSYS),
    ]
    return assemble(program)
