"""C++/CUDA checks of the static rules: one source at a time, on the lexer's comment- and string-free text."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules.lexer import line_of, strip_cpp
from cuda_gym.judge.rules.policy import (
    ATEN_ALLOWED,
    CPP_COMPUTE_METHODS,
    CUBLAS_ALLOWED,
    CUDNN_ALLOWED,
    HEADER_SUFFIXES,
    NATIVE_PYTHON_HEADERS,
    PYBIND_ALLOWED,
    RuleConfig,
)

_TENSOR_METHOD = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*\(")
_NS_CALL = re.compile(r"\b(at|torch|ATen)\s*::\s*((?:\w+\s*::\s*)*)(\w+)")
_CUBLAS = re.compile(r"\b(cublas(?:Lt)?[A-Z]\w*|cudnn[A-Z]\w*)\s*\(")
_OTHER_LIBS = re.compile(r"\b(cblas_\w+|mkl_\w+|cufft\w+|cusparse\w+|cusolver\w+|curand\w+|Eigen\s*::|dnnl\w*|"
                         r"cudnn_frontend\s*::|cutlass\s*::\s*library\w*)")
_EXTRA_COMPUTE = frozenset({"matmul", "mm", "bmm", "addmm", "conv2d", "softmax", "relu", "sigmoid", "tanh", "sum",
                            "mean", "exp", "log", "sqrt", "pow", "abs", "clamp", "max", "min", "norm", "where",
                            "gelu"})
_DIRECTIVE = re.compile(r"(?m)^[ \t\f\v]*#[ \t\f\v]*(\w+)(.*)$")
_PRAGMA_OPERATOR = re.compile(r"\b_Pragma\s*\(")
_SYSTEM_HEADER = re.compile(r"^[\w./+-]+$")


@dataclass(frozen=True)
class _Pattern:
    """One row of the simple pattern rules: where ``regex`` matches the code, ``rule`` is broken."""

    rule: str
    regex: re.Pattern[str]
    message: str
    """Formatted with ``name`` (the matched text, blanks removed)."""
    when: Callable[[RuleConfig], bool] = lambda _c: True
    skip_member: bool = False
    """Skip matches called as a member (``obj.system(...)``, ``x->open(...)``, ``ns::kill``)."""
    skip_qualified: bool = True
    """With ``skip_member``, also skip qualified names (``ns::name``). ``False`` for C library functions:
    ``::alarm``, ``std::signal`` or ``q::alarm`` after ``namespace q { using ::alarm; }`` are the same function
    (red team 2 review: each passed the signal row)."""


def _cuda(c: RuleConfig) -> bool:
    return c.flavour == "cuda"


def _fp32(c: RuleConfig) -> bool:
    return c.precision == "fp32"


PATTERNS: tuple[_Pattern, ...] = (
    _Pattern("l2-persist", re.compile(
        r"\b(cudaStreamSetAttribute|cudaStreamAttrValue|cudaStreamAttributeAccessPolicyWindow|\w*AccessPolicyWindow|"
        r"accessPolicyWindow|cudaLimitPersistingL2CacheSize|cudaCtxResetPersistingL2Cache|"
        r"cudaAccessProperty\w*|cuStreamSetAttribute|cuCtxSetLimit|cuCtxResetPersistingL2Cache|"
        r"CU_LIMIT_PERSISTING_L2_CACHE_SIZE|CU_ACCESS_PROPERTY_\w+|cudaKernelNodeAttributeAccessPolicyWindow|"
        r"annotated_ptr|apply_access_property|access_property\s*::\s*persisting)\b"),
        "{name} keeps lines resident in L2 across the judge's cache flush; not allowed."),
    _Pattern("stream", re.compile(
        r"\b(cudaStreamCreate\w*|cudaStreamPerThread|cudaStreamBeginCapture\w*|cudaGraph\w+|cudaLaunchHostFunc|"
        r"cudaStreamAddCallback|cudaHostGetDevicePointer|cudaHostAllocMapped|cudaHostRegister\w*|"
        r"cudaSetDeviceFlags|cudaDeviceScheduleSpin|cudaStreamNonBlocking|cuStreamCreate\w*|cuGraph\w+|"
        r"cuLaunchHostFunc|cudaMallocManaged|cudaLaunchCooperativeKernelMultiDevice|cuda::std::thread)\b"),
        "{name} can run work outside the timed stream; use the current stream only."),
    _Pattern("stream", re.compile(
        r"\b(cuStreamWaitValue\w*|cuStreamWriteValue\w*|cuStreamBatchMemOp\w*|\w*GetExportTable\w*|DriverAPI|"
        r"driver_api\.h|cuGreenCtx\w*|cuCtxSetCurrent\w*|cuCtxCreate\w*|cuCtxPushCurrent\w*|cuDevicePrimaryCtx\w*)\b"),
        "{name}: stream memory operations are the judge's own release and done signals, and driver tables or "
        "contexts of one's own are hidden from these rules (red team 3); not allowed."),
    _Pattern("stream", re.compile(
        r"\b(cudaDeviceEnablePeerAccess\w*|cuCtxEnablePeerAccess\w*|cudaMemcpy(?:3D)?Peer\w*|cuMemcpy(?:3D)?Peer\w*|"
        r"cuMemSetAccess\w*|cuMemImportFromShareableHandle\w*|cuMemExportToShareableHandle\w*|cudaIpc\w+|cuIpc\w+)\b"),
        "{name} reaches memory or GPUs beyond the call's own device and inputs; not allowed."),
    _Pattern("thread", re.compile(
        r"\b(?:(std\s*::\s*(?:thread|jthread|async|packaged_task)|tbb\s*::|boost\s*::\s*thread)\b|"
        r"(pthread_\w+)\s*\()"), "{name}: host threads are not allowed."),
    _Pattern("thread", re.compile(r"\b(omp_\w+)\s*\("), "{name}: OpenMP is allowed only on the cpu flavour.", _cuda),
    _Pattern("thread", re.compile(
        r"\b(sigaction|signal|sigset|sysv_signal|bsd_signal|__sysv_signal|sigaltstack|sigqueue|raise|alarm|ualarm|"
        r"setitimer|timer_create|timer_settime|timerfd_create|timerfd_settime|signalfd|tgkill|tkill)\s*\("),
        "{name}: signal handlers and timers run code outside forward (red team 2 r5); not allowed.",
        skip_member=True, skip_qualified=False),
    _Pattern("process", re.compile(
        r"\b(std\s*::\s*system|(?:fork|vfork|clone|clone3|posix_spawnp?|system|popen|execv\w*|execl\w*|fexecve|"
        r"kill|daemon|forkpty)\s*\()"),
        "{name}: starting or signalling processes from native code is not allowed.", skip_member=True,
        skip_qualified=False),
    _Pattern("introspection", re.compile(
        r"\b(ptrace|process_vm_readv|process_vm_writev|syscall|mprotect|__builtin_frame_address|"
        r"__builtin_return_address)\b"), "{name}: tracing or raw system calls are not allowed."),
    _Pattern("native-python", re.compile(
        r"\b(dlopen|dlsym|dlvsym|dlmopen|dlinfo|dladdr\w*|_?Py(?:_\w+|[A-Z]\w*)|THP\w+|\w*PyInterpreter\w*|"
        r"\w*PyObject\w*|PYBIND11_EMBEDDED_MODULE|PYBIND11_OVERRIDE\w*|PYBIND11_OVERLOAD\w*)\b"),
        "{name} reaches the Python interpreter (or loads libraries) from native code; not allowed."),
    _Pattern("checker-patch", re.compile(
        r"\b((?:c10|at|torch)\s*::\s*impl\b|\w*DispatchKeyGuard\w*|\w*DispatchKeySetGuard\w*|"
        r"AutoDispatch\w*|AutoNonVariableTypeMode|\w*DispatchModeTLS\w*|\w*TorchFunction\w*TLS\w*|"
        r"PythonDispatcherTLS|tls_set_dispatch_key\w*|tls_is_dispatch_key\w*|tls_local_dispatch_key_set|"
        r"_force_tls_local_dispatch_key_set|\w*LocalDispatchKeySet\w*|DispatchKey\s*::\s*(?:Python\w*|PreDispatch|"
        r"FuncTorch\w*)|ThreadLocalStateGuard|DisableTorchDispatch|ExcludeDispatchKey\w*|IncludeDispatchKey\w*)"),
        "{name} changes which dispatch keys run: it hides PyTorch ops from the judge's audit; not allowed."),
    _Pattern("torch-compute", re.compile(r"\b(Dispatcher\s*::\s*singleton|findSchema\w*|callBoxed\w*|"
                                         r"redispatch\w*|_ops\s*::)"),
             "{name} calls PyTorch operators through the dispatcher; write the kernel yourself."),
    _Pattern("native-python", re.compile(r"(?:\.|->)\s*(attr|import_?|inc_ref|dec_ref|def_submodule|add_object|"
                                         r"reload)\s*\("),
             ".{name}(...) works on Python objects from native code; only m.def(...) may be used."),
    _Pattern("io", re.compile(
        r"\b(fopen|freopen|fwrite|fread|std\s*::\s*[io]?fstream|ifstream|ofstream|getenv|secure_getenv|setenv|"
        r"putenv|unsetenv|socket|connect|open|openat|creat|unlink|remove|rename|mmap|shm_open|"
        r"CUDA_LAUNCH_BLOCKING)\s*[(<:]"), "{name}: files, environment and network are not allowed.",
        skip_member=True),
    _Pattern("host-compute", re.compile(r"(\.\s*cpu\s*\(|\bkCPU\b|cudaMemcpyDeviceToHost|\.\s*numpy\s*\()"),
             "{name} moves data to the host; compute in CUDA kernels.", _cuda),
    _Pattern("precision", re.compile(
        r"\b(CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_COMPUTE_16F\w*|CUBLAS_TF32_TENSOR_OP_MATH|CUBLAS_TENSOR_OP_MATH|"
        r"CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION|CUDNN_DATA_HALF|CUDNN_DATA_BFLOAT16|CUDA_R_16F|CUDA_R_16BF|"
        r"CUDA_R_8F\w*)\b"), "{name} lowers the precision of an fp32 task.", _fp32),
    _Pattern("precision", re.compile(
        r"\b(__float2half\w*|__floats2half2\w*|__float22half2\w*|__float2bfloat16\w*|__floats2bfloat162\w*|"
        r"__float22bfloat162\w*|__float_to_tf32|__float2tf32|__nv_cvt_float\w*|__double2half\w*|"
        r"__double2bfloat16\w*|__nv_fp8\w*|wmma\s*::\s*precision\s*::\s*tf32|static_cast\s*<\s*(?:__)?(?:half|"
        r"nv_bfloat16|__nv_bfloat16|c10::Half|at::Half|c10::BFloat16|at::BFloat16)\s*>|"
        r"\(\s*(?:__)?(?:half|__nv_bfloat16|nv_bfloat16)\s*\)\s*[\w(])"),
        "{name} converts to a lower precision than the fp32 task.", _fp32),
    _Pattern("precision", re.compile(r"(__attribute__\s*\(\s*\(\s*optimize)"),
             "__attribute__((optimize(...))) changes code generation; not allowed.", _fp32),
)
"""The rules that are one regular expression each over the code (comments and strings blanked)."""


def check_cpp(
    text: str,
    file: str,
    config: RuleConfig | None = None,
    *,
    root: Path | None = None,
    device_code: bool = True,
) -> list[Violation]:
    """Check one C++/CUDA source and return its violations.

    Args:
        text: the source as the compiler reads it (line splices are joined here).
        file: its name for the violations (workspace-relative).
        config: flavour and precision.
        root: the workspace root, to resolve quoted ``#include`` targets (``None``: inline source).
        device_code: whether the file may hold ``__device__``/``__global__`` code (``.cu``, ``.cuh``).
    """
    config = config or RuleConfig()
    nc, code = strip_cpp(text)
    found: list[Violation] = []

    def add(rule: str, pos: int, message: str) -> None:
        found.append(Violation(rule, message, file, line_of(code, pos)))

    spans = _function_headers(code)
    _check_directives(nc, code, file, root, config, add)
    _check_asm(nc, code, spans, device_code, config, add)
    _check_aten(code, spans, device_code, config, add)
    _check_libraries(code, config, add)
    _check_patterns(code, config, add)
    _check_entry_points(nc, code, add)
    _check_pybind(code, add)
    _check_memoisation(code, spans, add)
    return found


_Add = Callable[[str, int, str], None]


def _check_directives(nc: str, code: str, file: str, root: Path | None, config: RuleConfig, add: _Add) -> None:
    """``#include``/``#embed``/``#pragma``/``#define`` lines and ``_Pragma(...)`` operators.

    Read on the text with strings intact (include targets and ``_Pragma`` operands are strings) and
    digraphs spelled out (``%:include`` is ``#include``).
    """
    for m in _DIRECTIVE.finditer(nc):
        directive, rest = m.group(1), m.group(2).strip()
        if directive in ("include", "include_next", "import", "embed"):
            _check_include(directive, rest, m.start(), file, root, config, add)
        elif directive == "pragma":
            _check_pragma(rest, m.start(), config, add)
        elif directive == "define":
            _check_define(rest, m.start(), add)
    for m in _PRAGMA_OPERATOR.finditer(code):  # found outside literals, its operand read with strings intact
        operand = re.match(r'\s*"((?:[^"\\\n]|\\.)*)"\s*\)', nc[m.end():])
        if operand is None:
            add("include", m.start(), "_Pragma(...) with an operand that is not one plain string literal "
                "(a macro argument, a raw or prefixed string) hides a pragma; write #pragma lines.")
        else:  # destringize as the compiler does: \" -> ", \\ -> \
            _check_pragma(re.sub(r'\\(["\\])', r"\1", operand.group(1)).strip(), m.start(), config, add)


_ENTRY_POINT = re.compile(r"\b(cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*)\b")
_ENTRY_POINTS_ALLOWED = re.compile(r"cuTensorMap(?:EncodeTiled|EncodeIm2col\w*|EncodeIm2colWide|ReplaceAddress)")
"""Driver functions a kernel may resolve by name: the TMA descriptor encoders of Hopper kernels (the build
links no ``libcuda``, so this lookup is their only way in)."""


def _check_entry_points(nc: str, code: str, add: _Add) -> None:
    """A driver function resolved by name is hidden from every name rule (``cuStreamWaitValue32``,
    ``cuCtxSetLimit``...): allowed only with a plain string literal naming an allowed function, read from
    the text with strings intact (red team 3)."""
    for m in _ENTRY_POINT.finditer(code):
        operand = re.match(r'\s*\(\s*"(\w+)"\s*,', nc[m.end():])
        if operand is None or not _ENTRY_POINTS_ALLOWED.fullmatch(operand.group(1)):
            named = f' ("{operand.group(1)}")' if operand else ""
            add("stream", m.start(), f"{m.group(1)}{named} resolves a driver function by name, hidden from these "
                "rules; only the TMA encoders (cuTensorMapEncodeTiled...) named by a string literal are allowed.")


def _check_include(directive: str, rest: str, pos: int, file: str, root: Path | None, config: RuleConfig,
                   add: _Add) -> None:
    if directive == "embed":
        add("include", pos, "#embed pulls a file into the binary; not allowed.")
        return
    target, angle = include_target(rest)
    if target is None:
        add("include", pos, f"#include {rest} names its file through a macro; write the file name "
            "in quotes or angle brackets.")
        return
    problem = _bad_include(target, angle, file, root)
    cuda = config.flavour == "cuda"
    if problem:
        add("include", pos, problem)
    elif NATIVE_PYTHON_HEADERS.match(target):
        add("native-python", pos, f"#include <{target}> reaches the Python interpreter or loads "
            "libraries; a binding needs only <torch/extension.h>.")
    elif re.search(r"(^|/)(cblas|mkl|Eigen|eigen3|dnnl|oneapi|openblas|lapack)", target):
        add("library-compute", pos, f"#include <{target}>: math libraries are not allowed.")
    elif re.match(r"(thread|future|pthread\.h)$", target):
        add("thread", pos, f"#include <{target}>: host threads are not allowed.")
    elif re.match(r"(csignal|signal\.h|sys/signalfd\.h|sys/timerfd\.h)$", target):
        add("thread", pos, f"#include <{target}>: signal handlers and timers are not allowed.")
    elif re.match(r"(spawn\.h|sys/wait\.h|unistd\.h)$", target):
        add("process", pos, f"#include <{target}>: processes are not allowed.")
    elif re.match(r"(fstream|sys/socket\.h|sys/mman\.h|fcntl\.h)$", target):
        add("io", pos, f"#include <{target}>: files and network are not allowed.")
    elif re.match(r"sys/ptrace\.h$", target):
        add("introspection", pos, f"#include <{target}>: tracing is not allowed.")
    elif not cuda and re.match(r"(cublas|cudnn|cuda)", target):
        add("library-compute", pos, f"#include <{target}> on the cpu flavour; write plain C++.")


def _check_pragma(rest: str, pos: int, config: RuleConfig, add: _Add) -> None:
    """One pragma, from a ``#pragma`` line or a ``_Pragma("...")`` operand."""
    low = rest.lower()
    if re.search(r"fast.?math|ofast|unsafe.math|float_control|fenv_access|clang\s+fp\b|optimize", low) and \
            config.precision == "fp32":
        add("precision", pos, f"#pragma {rest} changes floating-point semantics; not allowed.")
    elif low.startswith("omp") and config.flavour == "cuda":
        add("thread", pos, "OpenMP is allowed only on the cpu flavour; use CUDA kernels.")
    elif low.startswith(("comment", "gcc push_options", "gcc target", "gcc plugin", "weak", "gcc pop_options",
                         "gcc reset_options", "gcc dependency", "push_macro", "pop_macro", "redefine_extname")):
        add("include", pos, f"#pragma {rest} changes linking, code generation or macros; not allowed.")


def _check_define(rest: str, pos: int, add: _Add) -> None:
    """Token pasting (``##``) in a macro body: it makes names out of pieces that no check reads whole.

    ``JOIN(Py, Run_SimpleString)(...)`` calls the CPython API although neither argument is a Python
    name, and ``x.JOIN(re, lu)()`` is a tensor compute method; so every ``##`` is refused, whatever
    its operands, except the GNU comma idiom ``, ## __VA_ARGS__`` (it pastes nothing: it drops the
    comma when the variadic arguments are empty). Honest kernels write names out or use templates.
    """
    head = re.match(r"\s*(\w+)(\(([^)]*)\))?", rest)
    body = rest[head.end():] if head else rest
    variadic = {"__VA_ARGS__"}
    if head and head.group(2):  # GNU named variadic parameter: #define F(fmt, args...) f(fmt, ##args)
        variadic |= {p.strip()[:-3].strip() for p in head.group(3).split(",") if p.strip().endswith("...")}
    for m in re.finditer(r"##", body):
        after = re.match(r"\s*(\w+)", body[m.end():])
        if body[:m.start()].rstrip().endswith(",") and after and after.group(1) in variadic:
            continue
        add("native-python", pos, "Token pasting (##) in a macro builds names the static rules cannot read (a "
            "route into the interpreter such as Py ## Run_SimpleString, or a PyTorch op); write names out "
            "or use templates.")
        return


def include_target(rest: str) -> tuple[str | None, bool]:
    """``(file name, angle)`` of an ``#include`` operand; ``(None, False)`` when the name comes from a macro."""
    if rest[:1] == "<" and ">" in rest:
        return rest[1:rest.index(">")], True
    if rest[:1] == '"' and rest.count('"') >= 2:
        return rest[1:rest.index('"', 1)], False
    return None, False


def _check_asm(nc: str, code: str, spans: list[tuple[int, int, str]], device_code: bool, config: RuleConfig,
               add: _Add) -> None:
    """Inline assembly: host code never; device PTX without embedded files, lower precision or L2 policies."""
    for m in re.finditer(r"\b(asm|__asm__|__asm)\b\s*(volatile|__volatile__)?\s*(goto\s*)?\(", code):
        end = nc.find(";", m.end())
        body = nc[m.end(): end if end > 0 else len(nc)]
        if not device_code or not _in_device_function(spans, m.start()):
            add("introspection", m.start(), "Inline assembly (or an asm symbol label) in host code is not allowed.")
        elif ".incbin" in body:
            add("include", m.start(), ".incbin embeds a file; not allowed.")
        elif re.search(r"createpolicy|evict_last|L2::cache_hint|applypriority|\.persisting", body):
            add("l2-persist", m.start(), "PTX cache policies (createpolicy, evict_last, cache_hint) keep lines in L2 "
                "across the judge's flush; not allowed.")
        elif config.precision == "fp32" and re.search(
                r"\btf32\b|\.f16\b|\.bf16\b|\.e4m3|\.e5m2|\.f16x2|\.bf16x2|cvt\.rn\.f16", body):
            add("precision", m.start(), "Inline PTX with half/bf16/tf32 types lowers the precision of an fp32 task.")


def _check_aten(code: str, spans: list[tuple[int, int, str]], device_code: bool, config: RuleConfig,
                add: _Add) -> None:
    """``at::``/``torch::`` functions and tensor compute methods called from C++."""
    for m in _NS_CALL.finditer(code):
        inner, leaf = re.sub(r"\s", "", m.group(2)), m.group(3)
        full = f"{m.group(1)}::{inner}{leaf}"
        if inner.startswith("native") or leaf == "native":
            add("torch-compute", m.start(), f"{full} is ATen compute; write the kernel yourself.")
        elif leaf in ("getStreamFromPool", "setCurrentCUDAStream", "getStreamFromExternal", "CUDAStreamGuard",
                      "CUDAMultiStreamGuard"):
            add("stream", m.start(), f"{full} uses a non-current stream; launch on the current stream.")
        elif leaf in ("set_num_threads", "parallel_for", "launch", "intraop_launch", "parallel_reduce"):
            add("thread", m.start(), f"{full} runs PyTorch's thread pool; use OpenMP (cpu) or CUDA kernels.")
        elif inner.startswith(("python::", "jit::", "autograd::python")) or leaf in ("python", "PythonArgParser"):
            add("native-python", m.start(), f"{full} reaches Python from C++; not allowed.")
        elif not (leaf in ATEN_ALLOWED or re.match(r"k[A-Z]\w*$", leaf) or leaf[:1].isupper()
                  or inner in ("indexing::", "detail::")):
            add("torch-compute", m.start(), f"{full} is PyTorch compute in C++; only allocation (torch::empty...), "
                "views and metadata are allowed.")
    fp32 = config.precision == "fp32"
    for m in _TENSOR_METHOD.finditer(code):
        name = m.group(1)
        if name in CPP_COMPUTE_METHODS or name in _EXTRA_COMPUTE:
            if device_code and _in_device_function(spans, m.start()):
                continue
            prefix = code[max(0, m.start() - 40): m.start()]
            if re.search(r"(std|thrust|cub|numeric_limits<[^>]*>)\s*$", prefix):
                continue
            add("torch-compute", m.start(), f".{name}(...) on a tensor is PyTorch compute in C++; call your kernel.")
        elif name in ("to", "toType", "half", "bfloat16") and fp32:
            args = code[m.end(): code.find(")", m.end())]
            if name in ("half", "bfloat16") or re.search(r"k(Half|BFloat16|Float16)\b", args):
                add("precision", m.start(), f".{name}(...) lowers the precision of an fp32 task.")


def _check_libraries(code: str, config: RuleConfig, add: _Add) -> None:
    """cuBLAS for GEMM and cuDNN for convolution on the cuda flavour; no other library anywhere."""
    cuda = config.flavour == "cuda"
    for m in _CUBLAS.finditer(code):
        name = m.group(1)
        if not cuda:
            add("library-compute", m.start(), f"{name} on the cpu flavour: write plain C++ (OpenMP allowed).")
        elif name.startswith("cublas"):
            # SetStream needs no check: every way to get a non-current stream is flagged where it is made
            if not CUBLAS_ALLOWED.match(name.replace("_v2", "")):
                add("library-compute", m.start(), f"{name}: cuBLAS is allowed for GEMM only.")
        elif not CUDNN_ALLOWED.match(name):
            add("library-compute", m.start(), f"{name}: cuDNN is allowed for convolution only.")
    for m in _OTHER_LIBS.finditer(code):
        add("library-compute", m.start(), f"{m.group(1).strip()}: only cuBLAS GEMM and cuDNN convolution may be used.")


def _check_patterns(code: str, config: RuleConfig, add: _Add) -> None:
    """Every row of :data:`PATTERNS` that applies to ``config``."""
    for row in PATTERNS:
        if not row.when(config):
            continue
        for m in row.regex.finditer(code):
            before = r"(\.|->|::)\s*$" if row.skip_qualified else r"(\.|->)\s*$"
            if row.skip_member and re.search(before, code[max(0, m.start() - 3): m.start()]) and \
                    not code[m.start():m.end()].startswith("std"):
                continue
            text = next((g for g in m.groups() if g), m.group(0))
            add(row.rule, m.start(), row.message.format(name=re.sub(r"\s", "", text)))


_PYBIND = re.compile(r"\b(pybind11|py)\s*::\s*(\w+)(\s*::\s*\w+)?")


def _check_pybind(code: str, add: _Add) -> None:
    """pybind11 beyond defining functions on the module a binding is handed: ``native-python``.

    Namespace aliases (``namespace P = pybind11;``), ``using namespace pybind11`` and ``using``
    declarations of pybind11 names are violations themselves: they would hide the name checked here.
    """
    for m in re.finditer(r"\bnamespace\s+(\w+)\s*=\s*(?:::\s*)?(pybind11|py)\b", code):
        add("native-python", m.start(), f"namespace {m.group(1)} = {m.group(2)} hides pybind11 calls; write "
            "pybind11:: in full.")
    for m in re.finditer(r"\busing\s+(namespace\s+)?(?:::\s*)?(pybind11|py)\b", code):
        add("native-python", m.start(), f"using {m.group(1) or ''}{m.group(2)} hides pybind11 calls; write "
            "pybind11:: in full.")
    for m in _PYBIND.finditer(code):
        name, member = m.group(2), m.group(3)
        if name in PYBIND_ALLOWED and not (name in ("module_", "module") and member):
            continue
        full = re.sub(r"\s", "", m.group(0))
        add("native-python", m.start(), f"{full} works with Python objects from native code; a binding may only "
            "m.def(...) its functions.")


def _check_memoisation(code: str, spans: list[tuple[int, int, str]], add: _Add) -> None:
    """Static or global maps, containers, tensors and pointers: state kept across calls."""
    for m in re.finditer(r"(?m)^[^\n#]*?\bstatic\s+(?:thread_local\s+)?(?:const\s+)?([\w:<>,\s*&]+?)\s*(\w+)\s*(?:=|;|\{|\[)",
                         code):
        decl = m.group(1)
        if re.search(r"\b(map|unordered_map|set|unordered_set|vector|deque|list|Tensor|optional|shared_ptr|unique_ptr)\b",
                     decl) and "(" not in m.group(0):
            add("memoisation", m.start(), f"static {decl.strip()} {m.group(2)}: state kept across calls is not allowed.")
        elif "*" in decl and not re.search(r"\bchar\b", decl) and "(" not in m.group(0):
            add("memoisation", m.start(), f"static pointer {m.group(2)}: state kept across calls is not allowed.")
    for m in re.finditer(r"(?m)^\s*(?:std\s*::\s*)?(?:unordered_map|map)\s*<", code):
        if not _inside_function(spans, m.start()):
            add("memoisation", m.start(), "A global map keeps results across calls; not allowed.")
    for m in re.finditer(r"(?m)^\s*(?:at|torch)\s*::\s*Tensor\s+\w+\s*(?:;|=)", code):
        if not _inside_function(spans, m.start()):
            add("memoisation", m.start(), "A global Tensor keeps results across calls; not allowed.")


def _function_headers(code: str) -> list[tuple[int, int, str]]:
    """Top-level function bodies as (start, end, header) in code with comments and strings blanked."""
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str, bool]] = []
    opaque = 0  # open braces that are not namespace/extern/struct/class scopes
    last_stmt = 0
    for m in re.finditer(r"[{};#]", code):
        i, c = m.start(), m.group(0)
        if c == "{":
            header = code[last_stmt:i]
            transparent = bool(re.search(r"\bnamespace\b|\bextern\s*\"?|\bstruct\b|\bclass\b", header)) and "(" not in header
            stack.append((i, header, transparent))
            opaque += not transparent
            last_stmt = i + 1
        elif c == "}":
            if stack:
                start, header, transparent = stack.pop()
                opaque -= not transparent
                if not transparent and opaque == 0:
                    spans.append((start, i, header))
            last_stmt = i + 1
        elif c == ";" and opaque == 0:
            last_stmt = i + 1
        elif c == "#":
            nl = code.find("\n", i)
            last_stmt = max(last_stmt, nl + 1 if nl > 0 else i)
    return spans


def _in_device_function(spans: list[tuple[int, int, str]], pos: int) -> bool:
    for start, end, header in spans:
        if start <= pos <= end:
            return bool(re.search(r"__device__|__global__", header))
    return False


def _inside_function(spans: list[tuple[int, int, str]], pos: int) -> bool:
    return any(start <= pos <= end for start, end, _ in spans)


def _bad_include(target: str, angle: bool, file: str, root: Path | None) -> str | None:
    """Why an #include target is not allowed, or None (the target itself is read by the file scan)."""
    if not target:
        return "An #include without a plain file name is not allowed."
    parts = Path(target).parts
    escapes = ".." in parts
    if escapes and not angle:
        if root is not None:
            escapes = not _lexically_inside((Path(file).parent / target).as_posix())
        else:  # no workspace known: kernels/x.cpp may still reach the root's own headers
            escapes = parts.count("..") > 1 or parts[0] != ".."
    if target.startswith(("/", "~")) or escapes or "\\" in target:
        return f"#include {target!r} reaches outside the workspace; include only your own and system headers."
    if Path(target).suffix not in HEADER_SUFFIXES:
        return f"#include {target!r} is not a header; include only headers (.h, .cuh, .hpp)."
    if not _SYSTEM_HEADER.match(target):
        return f"#include {target!r} has an unusual name; include plain header names."
    return None


def _lexically_inside(rel: str) -> bool:
    """Whether a workspace-relative path with ``..`` parts stays inside the root (no links consulted)."""
    depth = 0
    for part in rel.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True
