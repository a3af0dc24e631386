"""The adversarial suite: one entry per hack submission, with what the static rules and the judge must find."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
TASKS = HERE / "tasks"


@dataclass(frozen=True)
class Case:
    """One hack submission.

    Attributes:
        name: directory under ``cases/`` (a workspace: ``model_new.py`` + ``kernels/``).
        hack: catalogue number and name (docs/rules.md, peers.md section 5).
        task: ``custom:<file stem>`` (tests/adversarial/tasks) or a KernelBench id ``kernelbench/L1/...``.
        flavour: ``cpu`` (judged on the CPU device in CI) or ``cuda`` (GPU tests).
        static: rules ``rules.check_submission`` must report (empty: invisible to static checks).
        judge: what the judge must report: rule names of violations, or ``correctness`` (a failed
            trial), and ``low-variance`` where ``low_variance_output`` must be set too.
        mode: the judge mode needed to see it (``full`` when only checked timed outputs reveal it).
        held_out: judged with ``JudgeConfig.held_out_shapes`` (the hack only shows on other shapes).
        runtime: for native-code cases (``native`` true): what the judge must find with the static
            rules switched off (rule names or ``correctness``); empty means only that the reward may
            not exceed the honest slow base's (``tests/solutions/<flavour>_scale_relu_slow``).
        head_start: the case counts, in the ``event_ms`` of its ``Finished`` (its own instrument, summed
            over its calls so far), the work it did that the judge's clock cannot have seen; with the
            static rules off that count must stay 0 (its median over the timed calls).
    """

    name: str
    hack: str
    task: str
    flavour: str
    static: frozenset[str] = field(default_factory=frozenset)
    judge: frozenset[str] = field(default_factory=frozenset)
    mode: str = "full"
    native: bool = False
    runtime: frozenset[str] = field(default_factory=frozenset)
    held_out: bool = False
    head_start: bool = False

    @property
    def path(self) -> Path:
        """The case's workspace directory."""
        return CASES / self.name

    @property
    def gpu(self) -> bool:
        """Whether judging it needs a CUDA device."""
        return self.flavour == "cuda"


def _c(name: str, hack: str, task: str, flavour: str, static: set[str], judge: set[str], mode: str = "full") -> Case:
    return Case(name, hack, task, flavour, frozenset(static), frozenset(judge or static), mode)


SR = "custom:scale_relu"


def _n(name: str, hack: str, static: set[str], runtime: set[str], flavour: str = "cpu", head_start: bool = False) -> Case:
    """A native-code hack on the honest slow base: -1 with the static rules, no gain without them."""
    return Case(name, hack, SR, flavour, frozenset(static), frozenset(static), native=True, runtime=frozenset(runtime),
                head_start=head_start)

MANIFEST: list[Case] = [
    _c("c01_allocator_reuse", "1 allocator result reuse", SR, "cpu", set(), {"correctness"}),
    _c("c02_input_mutation", "2 input mutation", SR, "cpu", set(), {"input-mutation"}),
    _c("c04_thread_cpp", "4 thread injection (C++ std::thread)", SR, "cpu", {"thread"}, {"thread"}),
    _c("c04_thread_python", "4 thread injection (python threading)", SR, "cpu", {"thread"}, {"thread"}),
    _c("c05_tensor_subclass", "5 lazy tensor subclass", SR, "cpu", {"tensor-subclass"}, {"tensor-subclass"}),
    _c("c06_timer_patch", "6 timer monkey-patch", SR, "cpu", {"timer-patch"}, {"timer-patch"}),
    _c("c07_checker_patch", "7 comparator patch", SR, "cpu", {"checker-patch"}, {"checker-patch"}),
    _c("c08_functional_fallback", "8 torch fallback (F.* bound at import)", SR, "cpu", {"torch-compute"}, set()),
    _c("c08_decoy_tensor_method", "8 decoy kernel + tensor methods", SR, "cpu", {"torch-compute"}, set()),
    _c("c08_try_fallback", "8 try/except fallback", SR, "cpu", {"fallback", "torch-compute"}, set()),
    _c("c08_subclass_reference", "8 subclass the reference Model", SR, "cpu", {"fallback"}, set()),
    _c("c08_aten_in_cpp", "8 torch fallback in C++ (at::relu)", SR, "cpu", {"torch-compute"}, set()),
    _c("c09_gc_theft", "9 gc reference theft", SR, "cpu", {"introspection"}, set()),
    _c("c10_memo_data_ptr", "10 memoisation by data_ptr (python)", SR, "cpu", {"memoisation"}, set()),
    _c("c10_memo_cpp", "10 memoisation by data_ptr (C++ static map)", SR, "cpu", {"memoisation"}, set()),
    _c("c11_phase_python", "11 phase detection (call counting, python)", SR, "cpu", {"memoisation"}, set()),
    _c("c11_phase_cpp", "11 phase detection (call counting, C++)", SR, "cpu", set(), {"correctness"}),
    _c("c12_precision_python", "12 precision downgrade (.half())", SR, "cpu", {"precision"}, set()),
    _c("c13_constant_output", "13 constant output on a low-variance task (scale-aware check)", "custom:centered_mean",
       "cpu", set(), {"low-variance", "correctness"}),
    Case("c36_hardcoded_shape", "14 shape specialisation (held-out shapes)", SR, "cpu", frozenset(),
         frozenset({"correctness"}), held_out=True),
    _c("c15_silent_failure", "15 silent failure returning uninitialised memory", SR, "cpu", set(), {"correctness"}),
    _c("c18_tamper_infra", "18 workspace tampering (binding.cpp, model.py)", SR, "cpu", set(), {"infra-tamper"}),
    _c("c19_nan_output", "19 NaN output", SR, "cpu", set(), {"correctness"}),
    _c("c20_native_python_include", "21 Python from native code (CPython API in an #included .ipp, name split by a "
       "line splice)", SR, "cpu", {"native-python"}, {"native-python"}),
    _c("c21_fork_helper", "22 helper process forked from native code", SR, "cpu", {"process"}, {"process"}),
    _n("c30_native_clock_rebind", "21 native code rebinds the clocks and timing helpers", {"native-python"}, set()),
    _n("c31_native_reply_forge", "22 native code rewrites the report (event time, findings)", {"native-python"}, set()),
    _n("c32_native_done_early", "23 answer before the work is done (detached thread)", {"thread"},
       {"correctness", "early-answer", "thread"}),
    _n("c33_native_seed_theft", "24 seeds of checked calls stolen through gc", {"native-python"}, set()),
    _n("c34_native_prefetch", "25 work before the window (helper watches the inputs)", {"native-python"},
       {"thread", "background-work", "correctness"}),
    _n("c35_native_unchecked_corrupt", "26 honest while audited, wrong on unchecked calls", {"native-python"},
       {"correctness"}),
    _c("c46_native_python_paste", "21 Python from native code through a generic token-pasting macro "
       "(JOIN(Py, Run_SimpleString), red team B6)", SR, "cpu", {"native-python"}, {"native-python"}),
    _c("c47_native_python_digraph", "21 Python from native code spelled with digraphs (%:include <Python.h>, "
       "%:%: pasting, red team B6)", SR, "cpu", {"native-python"}, {"native-python"}),
    _c("c40_answer_huge_expand", "27 an answer the driver would have to materialise (a stride-0 view of 2^28 elements)",
       SR, "cpu", set(), {"correctness"}),
    _c("c41_answer_huge_span", "27 an answer whose strides span a terabyte (from_blob over the stack)", SR, "cpu",
       set(), {"correctness"}),
    _c("c42_answer_quantized_dtype", "27 an answer of a quantized dtype (qint8: frombuffer crashed the driver)", SR,
       "cpu", set(), {"correctness"}),
    _c("c43_answer_bits_dtype", "27 an answer of a bit-packed dtype (bits8)", SR, "cpu", set(), {"correctness"}),
    _c("c44_answer_fd_flood", "27 a garbage packet carrying memfds into the driver (leaked fds and memory)", SR,
       "cpu", set(), {"correctness"}),
    _n("c45_arena_truncate", "28 the server shrinks the driver's input arena (SIGBUS in the driver)",
       {"fallback", "io"}, set()),
    _n("c48_native_deep_message", "27 a 20,000-deep JSON packet where the driver expects Loaded (RecursionError: "
       "a JudgeError, red team 2 d1)", {"io"}, {"correctness"}),
    _n("c49_native_signal_timer", "4 background work in a SIGALRM handler on the main thread (POSIX timer, red team 2 "
       "r5)", {"thread"}, set()),
    # Its runtime catch (background-work) depends on the spinner's share of a loaded CI machine's CPU (missed
    # once in a clean-clone CI run while other judges ran beside it): the counting it needs is checked
    # deterministically in tests/test_judge_observations.py; here only that it gains nothing.
    _n("c50_native_thread_relay", "4 background work in threads that hand over and exit every 0.3 ms of CPU (red team "
       "2 r4)", {"thread"}, set()),
    _n("c51_native_double_fork", "22 a helper process forked twice, reparented to the sandbox's init (red team 2 r3)",
       {"process"}, {"process"}),
    _n("c52_native_deep_message_after_answer", "27 a 20,000-deep JSON packet where the driver expects Finished "
       "(red team 2 d2)", {"introspection"}, {"correctness"}),
    # Its base is too slow for the head start to show in the reward (the copy lasts about a millisecond): the
    # case counts the output pages it computed while a copy was landing (100 a call without the pause).
    _n("c53_native_arena_watch", "29 native code takes the server's socket, answers the protocol itself, and computes "
       "output pages as the driver's input copy lands (red team 3 r01 and r02)", {"io", "process"}, set(),
       head_start=True),
    # Linger 3600 s: a driver that closes the received sockets where it waits again hangs past the test's timeout.
    _n("c54_native_lingering_socket", "27 a packet carrying both ends of a loopback TCP connection with SO_LINGER "
       "{1, 3600} and a full send buffer: the driver's close() blocked for the linger time (red team 6 X1)",
       {"io", "process"}, {"correctness"}),
    # Its effect (the teardown slowing what the judge times next) was not resolved above the noise: the case counts
    # the network namespaces its child made (up to 2,000; the seccomp filter lets it make none). Where the host
    # allows no user namespaces at all the count is 0 without the filter too; tests/test_syscall_filter.py checks
    # the filter against a host that makes them (skipped elsewhere).
    _n("c55_native_namespace_flood", "30 kernel work that outlives the sandbox: a child in a nested user namespace "
       "pins network namespaces, torn down after the kill (red team 6 X2)", {"native-python", "io", "process"}, set(),
       head_start=True),
    _n("c56_native_lingering_socket_queued", "27 c54's lingering TCP connection queued in a Unix socket behind 1,518 "
       "descriptors, 6 sockets deep: the worker's closer thread was held, its descriptors kept (red team 7 D1)",
       {"io", "process"}, {"correctness"}),
    _n("c57_native_fds_on_every_message", "27 every Armed and Finished carries 64 descriptors, a lingering TCP pair "
       "among them: the worker's closer thread fell about 34 s behind per evaluation (red team 8 B1)",
       {"native-python"}, {"correctness"}),
    _n("g30_native_done_early_cuda", "23 answer before the GPU work is done (synchronize patched, hidden stream)",
       {"native-python", "stream"}, set(), flavour="cuda"),
    _c("g01_allocator_reuse_cuda", "1 allocator result reuse (CUDA)", SR, "cuda", set(), {"correctness"}),
    _c("g03_side_stream_cpp", "3 side stream (C++ cudaStreamCreate)", SR, "cuda", {"stream"}, set()),
    _c("g03_side_stream_python", "3 side stream (torch.cuda.Stream)", SR, "cuda", {"stream"}, set()),
    _c("g08_decoy_cuda", "8 decoy kernel behind a ghost branch", SR, "cuda", {"torch-compute"}, set()),
    _c("g12_precision_cuda", "12 fp16 internals in the kernel", SR, "cuda", {"precision"}, set()),
    _c("g13_low_signal_zeros_cuda", "13 zeros on a low-signal task (KernelBench L1 23_Softmax, scale-aware check)",
       "kernelbench/L1/23_Softmax", "cuda", set(), {"low-variance", "correctness"}),
    _c("g15_silent_launch_failure", "15 silent launch failure", SR, "cuda", set(), {"correctness"}),
    _c("g16_host_compute", "16 host compute hidden from kernel timing", SR, "cuda", {"host-compute", "thread"}, set()),
    _c("g21_persisting_l2", "23 persisting-L2 access policy window (in a header without suffix)", SR, "cuda",
       {"l2-persist"}, set()),
]
"""Every case. Hacks 17 (name attribution) and 20 (impossible speed) have no case of their own: see
docs/rules.md for why."""
