"""Classic BPF programs for ``seccomp(2)``: the assembler, and the filter every sandboxed command runs under.

:func:`assemble` turns a list of instructions with named jump labels into a ``struct sock_filter`` array.
:func:`sandbox_filter` is the program the sandbox's prelude installs before the command (``Sandbox``): it
refuses the kernel key syscalls (``add_key``, ``request_key``, ``keyctl``) and every syscall of another ABI.
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
    """One architecture's ``AUDIT_ARCH_*``, the number above which its other ABI lies, and its key syscalls."""

    audit: int
    other_abi: int
    seccomp: int
    keys: tuple[int, int, int]
    """``add_key``, ``request_key``, ``keyctl``."""


ARCHES = {
    "x86_64": Arch(0xC000003E, other_abi=X32_SYSCALL_BIT, seccomp=317, keys=(248, 249, 250)),
    "aarch64": Arch(0xC00000B7, other_abi=0xFFFFFFFF, seccomp=277, keys=(217, 218, 219)),
}


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
        return 0 if not label else labels[label] - at - 1

    return b"".join(struct.pack("=HBBI", op, jump(jt, i), jump(jf, i), k) for i, (op, jt, jf, k) in enumerate(insns))


@functools.cache
def sandbox_filter(machine: str) -> bytes | None:
    """The sandbox's filter for ``machine`` (``EPERM`` for the key syscalls and for every syscall of another
    ABI, which would reach the kernel's key syscalls by other numbers), ``None`` where none is built."""
    if machine not in ARCHES:
        return None
    a = ARCHES[machine]
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    program: list[Instruction | str] = [
        (BPF_LD_W_ABS, "", "", 4),  # seccomp_data.arch
        (BPF_JMP_JEQ_K, "nr", "deny", a.audit),
        "nr",
        (BPF_LD_W_ABS, "", "", 0),  # seccomp_data.nr
        (BPF_JMP_JGE_K, "deny", "", a.other_abi),
        *[(BPF_JMP_JEQ_K, "deny", "", nr) for nr in a.keys],
        (BPF_RET_K, "", "", SECCOMP_RET_ALLOW),
        "deny",
        (BPF_RET_K, "", "", deny),
    ]
    return assemble(program)
