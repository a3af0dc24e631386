"""Static rules: what a submission's Python and C++/CUDA sources may not do (AST and lexer based)."""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from cuda_gym.judge.result import Violation

logger = logging.getLogger(__name__)

RULES: dict[str, str] = {
    "torch-compute": "PyTorch does the work: torch/F/aten calls, tensor math methods, nn layers called, "
    "at::/torch:: compute in C++. Only allocation, views and metadata are allowed.",
    "library-compute": "A vendor library does the work: cuBLAS beyond GEMM, cuDNN beyond convolution, "
    "any BLAS/cuBLAS/cuDNN on the cpu flavour, other math libraries.",
    "timer-patch": "Something assigns to or patches timing functions (torch.cuda events, synchronize, time).",
    "checker-patch": "Something assigns to attributes of torch, builtins or other modules (comparators).",
    "introspection": "gc, inspect, frames, ctypes, eval/exec, __import__, dunder reflection, dlopen, host asm.",
    "thread": "Threads or processes: threading, multiprocessing, subprocess, fork, std::thread, std::async.",
    "tensor-subclass": "Tensor subclasses, _make_subclass, __torch_function__/__torch_dispatch__.",
    "stream": "Extra CUDA streams, CUDA graphs, host callbacks or mapped host memory that escape the timer.",
    "memoisation": "State kept across calls: caches, lru_cache, data_ptr/id keys, static pointers, "
    "attributes assigned in forward, global statements.",
    "fallback": "try/except around compute, subclassing or calling the reference Model.",
    "io": "Files, network, environment changes, torch.save/load, C++ file streams and getenv/setenv.",
    "precision": "Lower precision than the task: half/bf16/tf32 conversions, autocast, allow_tf32, "
    "fast-math flags or pragmas.",
    "host-compute": "On the cuda flavour, tensors are moved to the host (.cpu(), kCPU, device-to-host copies) "
    "so work happens outside the kernels.",
    "include": "#include of a file outside the workspace or of a non-header file; .incbin/#embed.",
}
"""Every rule name this module reports, with a one-line description (see docs/rules.md)."""

CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".inl")
"""File suffixes scanned as C++/CUDA."""

INFRA_FILES = frozenset({"binding.cpp", "binding_registry.h"})
"""Workspace infrastructure (read-only, checked for tampering by the workspace, not here)."""

SKIP_PY = frozenset({"model.py"})
"""Python files in a workspace root that are not the agent's (the read-only reference)."""


@dataclass(frozen=True)
class RuleConfig:
    """Options of the static checker."""

    flavour: str = "cuda"
    """``cuda`` (cuBLAS GEMM and cuDNN convolution allowed) or ``cpu`` (OpenMP allowed, no libraries)."""
    precision: str = "fp32"
    """The task's precision; ``fp32`` forbids half/bf16/tf32 conversions and fast-math."""


def check_submission(path: Path | str, flavour: str = "cuda", *, precision: str = "fp32") -> list[Violation]:
    """Check a submission statically and return every violation found (empty: clean).

    Args:
        path: a workspace root (``model_new.py`` plus ``kernels/``) or a single KernelBench-style
            Python file whose ``load_inline`` sources are checked as C++ too.
        flavour: ``cuda`` or ``cpu``.
        precision: the task's precision (``fp32`` forbids lower-precision conversions).

    Each violation names its rule (see ``RULES``), the file relative to the workspace and the line.
    """
    if flavour not in ("cuda", "cpu"):
        raise ValueError(f"flavour must be 'cuda' or 'cpu', not {flavour!r}")
    config = RuleConfig(flavour=flavour, precision=precision)
    root = Path(path)
    found: list[Violation] = []
    if root.is_file():
        found += check_python(root.read_text(errors="replace"), root.name, config, root=root.parent)
    elif root.is_dir():
        for file in _submission_files(root):
            rel = file.relative_to(root).as_posix()
            if file.is_symlink():
                found.append(Violation("io", "Symbolic links are not allowed in a submission; write plain files.", rel))
                continue
            text = file.read_text(errors="replace")
            if file.suffix == ".py":
                found += check_python(text, rel, config, root=root)
            else:
                found += check_cpp(text, rel, config, root=root, device_code=file.suffix in (".cu", ".cuh"))
    else:
        raise FileNotFoundError(f"no submission at {root}: pass a workspace directory or a .py file")
    return _dedup(found)


def _submission_files(root: Path) -> Iterator[Path]:
    for file in sorted(root.iterdir()):
        if file.is_file() and file.name not in INFRA_FILES and file.name not in SKIP_PY:
            if file.suffix == ".py" or file.suffix in CPP_SUFFIXES:
                yield file
    kernels = root / "kernels"
    if kernels.is_dir():
        for file in sorted(kernels.rglob("*")):
            if (file.is_file() or file.is_symlink()) and (file.suffix == ".py" or file.suffix in CPP_SUFFIXES):
                yield file


def _dedup(found: Iterable[Violation]) -> list[Violation]:
    seen: set[tuple[str, str | None, int | None, str]] = set()
    out = []
    for v in found:
        key = (v.rule, v.file, v.line, v.message)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


# --------------------------------------------------------------------------------------------
# Python
# --------------------------------------------------------------------------------------------

TORCH_ALLOWED_CALLS = frozenset(
    {
        # allocation
        "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
        "torch.ones", "torch.ones_like", "torch.full", "torch.full_like", "torch.tensor", "torch.as_tensor",
        "torch.arange", "torch.from_numpy",
        # metadata and helpers
        "torch.device", "torch.Size", "torch.is_tensor", "torch.is_floating_point", "torch.numel",
        "torch.get_default_dtype", "torch.finfo", "torch.iinfo", "torch.promote_types",
        "torch.broadcast_shapes", "torch.no_grad", "torch.inference_mode", "torch.enable_grad",
        "torch.set_grad_enabled", "torch.manual_seed",
        "torch.cuda.is_available", "torch.cuda.current_device", "torch.cuda.device_count",
        "torch.cuda.current_stream", "torch.cuda.default_stream", "torch.cuda.synchronize",
        "torch.cuda.get_device_properties", "torch.cuda.get_device_capability", "torch.cuda.device",
        "torch.cuda.set_device", "torch.cuda.get_device_name",
        # containers that hold parameters
        "torch.nn.Parameter", "torch.nn.ParameterList", "torch.nn.ParameterDict", "torch.nn.Module",
        "torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.Buffer",
        # building the extension
        "torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load",
        "torch.utils.cpp_extension.include_paths", "torch.utils.cpp_extension.library_paths",
    }
)
"""``torch.*`` callables a submission may call: allocation, metadata, parameter containers, building."""

TORCH_RANDOM_INIT = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.rand_like", "torch.randn_like",
                               "torch.normal", "torch.randperm"})
"""Random initialisation, allowed in ``__init__`` only (the judge loads the reference weights after)."""

TORCH_OPS_NAMESPACES = frozenset(
    {"aten", "prim", "prims", "quantized", "_quantized", "quantized_decomposed", "torchvision", "torchaudio",
     "c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "inductor", "mkldnn", "onednn",
     "fbgemm", "higher_order", "rngprims"}
)
"""Operator namespaces that belong to PyTorch and friends: compute there is a fallback, whether called as
``torch.ops.<ns>`` in ``model_new.py`` (static rule) or seen by the runtime audit (``audit.OpAudit``).
Any other namespace (a candidate's own ``TORCH_LIBRARY``) is allowed."""

STREAM_NAMES = frozenset(
    {
        "torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.StreamContext", "torch.cuda.ExternalStream",
        "torch.cuda.set_stream", "torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.graphs",
        "torch.cuda.make_graphed_callables", "torch.Stream", "torch.cuda.streams", "torch.cuda.Event",
    }
)
"""Stream and graph APIs (events too: they only matter with extra streams or timer games)."""

TIMER_MODULES = ("torch.cuda", "time", "timeit", "torch.utils.benchmark", "torch.profiler", "torch.autograd.profiler")

INTROSPECTION_MODULES = frozenset(
    {"gc", "inspect", "ctypes", "cffi", "importlib", "builtins", "__builtin__", "traceback", "types", "code",
     "dis", "marshal", "pickle", "dill", "cloudpickle", "weakref", "sysconfig", "runpy", "pdb", "faulthandler",
     "tracemalloc"}
)
THREAD_MODULES = frozenset(
    {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "signal", "atexit", "asyncio",
     "sched", "pty", "torch.multiprocessing", "joblib"}
)
IO_MODULES = frozenset(
    {"socket", "urllib", "http", "requests", "shutil", "tempfile", "glob", "io", "pathlib", "ftplib", "smtplib",
     "ssl", "fcntl", "mmap", "sqlite3", "json", "csv", "zipfile", "tarfile"}
)

INTROSPECTION_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "breakpoint"})
INTROSPECTION_ATTRS = frozenset(
    {"_getframe", "f_back", "f_locals", "f_globals", "f_code", "tb_frame", "gi_frame", "cr_frame", "__globals__",
     "__code__", "__closure__", "__subclasses__", "__builtins__", "__dict__", "__class__", "__bases__", "__mro__",
     "settrace", "setprofile", "modules", "__self__", "__func__", "__wrapped__", "_current_frames",
     "addaudithook", "__reduce__", "__reduce_ex__"}
)
SUBCLASS_NAMES = frozenset(
    {"_make_subclass", "_make_wrapper_subclass", "__torch_function__", "__torch_dispatch__", "_python_dispatch",
     "TorchDispatchMode", "TorchFunctionMode", "overrides"}
)

COMPUTE_METHODS = frozenset(
    """abs abs_ absolute acos acosh add add_ addbmm addcdiv addcmul addmm addmv addr all allclose amax amin
    aminmax any argmax argmin argsort asin atan atan2 baddbmm bernoulli bmm ceil clamp clamp_ clamp_max
    clamp_min clip conv1d conv2d conv3d cos cosh count_nonzero cross cummax cummin cumprod cumsum deg2rad diag
    diff digamma dist div div_ divide dot einsum eq equal erf erfc erfinv exp exp_ exp2 expm1 fmax fmin floor
    floor_divide fmod frac gather ge gelu gelu_ ger gt hardtanh heaviside histc hypot index_add index_copy
    index_fill index_put index_select inner inverse isclose isfinite isinf isnan kthvalue lerp le lgamma
    log log_ log10 log1p log2 log_softmax logaddexp logcumsumexp logical_and logical_not logical_or
    logit logsumexp lt masked_fill masked_fill_ masked_scatter masked_select matmul max maximum mean median
    min minimum mm mode mul mul_ multiply mv nan_to_num nanmean nanmedian nansum ne neg neg_ negative norm
    outer pow pow_ prod quantile rad2deg reciprocal relu relu_ remainder renorm repeat repeat_interleave roll
    round rsqrt scatter scatter_add scatter_reduce sigmoid sigmoid_ sign signbit silu sin sinh softmax
    softplus sort sqrt sqrt_ square std sub sub_ subtract sum svd tan tanh tanh_ tensordot topk trace tril
    triu true_divide trunc unique var where xlogy mish hardswish leaky_relu elu selu celu logsigmoid
    softsign hardsigmoid threshold flip cumulative_trapezoid trapz kron cdist pdist""".split()
)
"""Tensor methods that compute (checked on every receiver except modules and the extension)."""

LOW_PRECISION_DTYPES = frozenset({"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
                                  "float8_e5m2fnuz"})
ENV_KEYS_ALLOWED = frozenset({"TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "TORCH_EXTENSIONS_DIR"})
"""Environment variables a single-file submission may set (they only steer ``load_inline``)."""

FAST_MATH_FLAGS = ("use_fast_math", "fast-math", "ffast-math", "Ofast", "funsafe-math", "fmad=true",
                   "ftz=true", "prec-div=false", "prec-sqrt=false")

OS_ALLOWED = frozenset({"os.path", "os.environ.get", "os.getenv", "os.cpu_count", "os.sep", "os.getpid",
                        "os.fspath", "os.environ.__getitem__"})
OS_PROCESS = frozenset({"fork", "forkpty", "system", "popen", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv",
                        "spawnve", "spawnvp", "spawnvpe", "execl", "execle", "execlp", "execlpe", "execv", "execve",
                        "execvp", "execvpe", "posix_spawn", "posix_spawnp", "kill", "killpg", "register_at_fork"})


def _torch_object(qual: str) -> object | None:
    """Resolve a dotted ``torch...`` name to the real object, or None."""
    import importlib

    parts = qual.split(".")
    try:
        obj: object = importlib.import_module(parts[0])
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    for i, part in enumerate(parts[1:], start=1):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            try:
                obj = importlib.import_module(".".join(parts[: i + 1]))
            except Exception:
                return None
        except Exception:
            return None
    return obj


def _is_layer_class(obj: object) -> bool:
    try:
        import torch

        return isinstance(obj, type) and issubclass(obj, torch.nn.Module)
    except Exception:  # pragma: no cover
        return False


class _PyChecker(ast.NodeVisitor):
    """One pass over a Python module's AST, collecting violations."""

    def __init__(self, file: str, config: RuleConfig, root: Path | None) -> None:
        self.file = file
        self.config = config
        self.root = root
        self.found: list[Violation] = []
        self.aliases: dict[str, str] = {}
        self.extension_names: set[str] = {"cuda_extension"}
        self.layer_attrs: set[str] = set()
        self.module_containers: set[str] = set()
        self.reference_names: set[str] = set()
        self.func_stack: list[str] = []
        self.strings: dict[str, list[tuple[str, int]]] = {}
        self.cpp_sources: list[tuple[str, int, bool]] = []

    # -- helpers ------------------------------------------------------------------------------
    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.found.append(Violation(rule, message, self.file, getattr(node, "lineno", None)))

    def qualname(self, node: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain with the root resolved through imports."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Call) and _call_name(node) == "getattr" and len(node.args) >= 2:
            name = node.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                base = self.qualname(node.args[0])
                if base:
                    return ".".join([base, name.value, *reversed(parts)])
            return None
        if not isinstance(node, ast.Name):
            return None
        root = self.aliases.get(node.id, node.id if node.id in ("torch",) else None)
        if root is None:
            return None
        return ".".join([root, *reversed(parts)])

    def receiver_root(self, node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    @property
    def in_init(self) -> bool:
        return bool(self.func_stack) and self.func_stack[-1] == "__init__"

    @property
    def in_function(self) -> bool:
        return bool(self.func_stack)

    # -- prepass ------------------------------------------------------------------------------
    def prepass(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    if node.module == "model" or node.module.endswith(".model"):
                        self.reference_names.add(a.asname or a.name)
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                for a in node.names:
                    if (node.module or "") == "model":
                        self.reference_names.add(a.asname or a.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                value = node.value
                if isinstance(value, ast.Call):
                    q = self.qualname(value.func) or ""
                    if q.endswith(("cpp_extension.load_inline", "cpp_extension.load")) or q == "importlib.import_module":
                        for t in node.targets:
                            self.extension_names.update(_target_names(t))
                    elif q.startswith("torch.nn.") and _is_layer_class(_torch_object(q)) and q not in TORCH_ALLOWED_CALLS:
                        for t in node.targets:
                            if isinstance(t, ast.Attribute):
                                self.layer_attrs.add(t.attr)
                            self.layer_attrs.update(_target_names(t))
                elif isinstance(value, ast.Name) and value.id in self.extension_names:
                    for t in node.targets:
                        self.extension_names.update(_target_names(t))
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                text = _string_value(node.value)
                if text is not None:
                    for name in (n for t in node.targets for n in _target_names(t)):
                        self.strings.setdefault(name, []).append((text, node.value.lineno))
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Dict, ast.List, ast.Set, ast.Call)):
                if isinstance(node.value, ast.Call) and _call_name(node.value) not in (
                    "dict", "list", "set", "defaultdict", "OrderedDict", "WeakValueDictionary", "WeakKeyDictionary"
                ):
                    continue
                for t in node.targets:
                    self.module_containers.update(_target_names(t))

    # -- visitors -----------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.check_module(a.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module:
            self.check_module(node.module, node)
            for a in node.names:
                full = f"{node.module}.{a.name}"
                self.check_module(full, node, imported_name=True)
                if full.startswith("torch") and a.name != "*":
                    self.check_torch_ref(full, node, call=False)
        for a in node.names:
            if a.name in SUBCLASS_NAMES:
                self.add("tensor-subclass", node, f"Importing {a.name} enables tensor subclasses or dispatch modes.")

    def check_module(self, name: str, node: ast.AST, imported_name: bool = False) -> None:
        top = name.split(".")[0]
        if name in ("sys",) or (top == "sys" and not imported_name):
            return
        if top in INTROSPECTION_MODULES or name in INTROSPECTION_MODULES or name.startswith("sys._"):
            self.add("introspection", node, f"Importing {name} gives access to interpreter internals; it is not allowed.")
        elif top in THREAD_MODULES or name in THREAD_MODULES:
            self.add("thread", node, f"Importing {name} starts threads or processes; all work must run in forward.")
        elif top in IO_MODULES:
            self.add("io", node, f"Importing {name} is file or network access; submissions may not do I/O.")
        elif name in ("functools.lru_cache", "functools.cache", "functools.cached_property"):
            self.add("memoisation", node, f"{name} caches results across calls; compute every call.")
        elif name in ("model", "model.Model") or name.endswith(".model"):
            self.add("fallback", node, "Importing the reference model is a fallback to PyTorch; write kernels instead.")
        elif name.startswith("torch.utils._python_dispatch") or name.startswith("torch.overrides"):
            self.add("tensor-subclass", node, f"{name} provides dispatch modes and tensor subclasses; not allowed.")
        elif name.startswith("torch._dynamo") or name.startswith("torch._inductor") or name == "torch.compile":
            self.add("torch-compute", node, f"{name} generates kernels with PyTorch; write your own.")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = self.qualname(target) or (target.id if isinstance(target, ast.Name) else "")
            if q.split(".")[-1] in ("lru_cache", "cache", "cached_property", "memoize"):
                self.add("memoisation", dec, f"@{q} caches results across calls; compute every call.")
        if node.name in ("__torch_function__", "__torch_dispatch__"):
            self.add("tensor-subclass", node, f"Defining {node.name} intercepts tensor operations; not allowed.")
        self.func_stack.append(node.name)
        self.generic_visit(node)
        self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.func_stack.append("<lambda>")
        self.generic_visit(node)
        self.func_stack.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            q = self.qualname(base) or (base.id if isinstance(base, ast.Name) else "")
            if q in ("torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase", "torch.nn.Parameter",
                     "torch.nn.parameter.Parameter"):
                self.add("tensor-subclass", node, f"class {node.name} subclasses {q}; outputs must be plain tensors.")
            elif q in ("Model", "model.Model") or (isinstance(base, ast.Name) and base.id in self.reference_names):
                self.add("fallback", node, f"class {node.name} subclasses the reference Model; write ModelNew from scratch.")
            elif q.startswith("torch.nn.") and q not in ("torch.nn.Module",) and _is_layer_class(_torch_object(q)):
                self.add("torch-compute", node, f"class {node.name} subclasses {q}, whose forward is PyTorch compute.")
            elif q.startswith("torch.utils._python_dispatch") or q.startswith("torch.overrides"):
                self.add("tensor-subclass", node, f"class {node.name} subclasses {q}; dispatch modes are not allowed.")
            elif q.startswith("threading.") or q.startswith("multiprocessing."):
                self.add("thread", node, f"class {node.name} subclasses {q}; threads are not allowed.")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if self.in_function or not _is_import_guard(node):
            self.add("fallback", node, "try/except can fall back to other code when a kernel fails; let errors surface.")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        self.add("memoisation", node, f"global {', '.join(node.names)} keeps state across calls; compute every call.")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add("memoisation", node, f"nonlocal {', '.join(node.names)} keeps state across calls.")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.add("torch-compute", node, "The @ operator is a PyTorch matmul; call your kernel instead.")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in INTROSPECTION_ATTRS and not (node.attr == "__class__" and _is_name(node.value, "self")):
            if not (node.attr == "modules" and self.qualname(node.value) != "sys"):
                self.add("introspection", node, f"Access to .{node.attr} reaches interpreter internals; not allowed.")
        if node.attr in SUBCLASS_NAMES:
            self.add("tensor-subclass", node, f".{node.attr} creates tensor subclasses or dispatch hooks; not allowed.")
        if node.attr in ("wait_stream", "record_stream"):
            self.add("stream", node, f".{node.attr} works with extra streams; use the current stream only.")
        if node.attr in ("data_ptr", "untyped_storage", "storage") and self.in_function and not self.in_init:
            if self._used_as_key(node):
                self.add("memoisation", node, f".{node.attr}() used as a key caches results by input address.")
        q = self.qualname(node)
        if q and isinstance(node.ctx, ast.Load) and not isinstance(getattr(node, "_parent", None), ast.Attribute):
            if q.startswith("torch.") and not getattr(node, "_is_call", False):
                self.check_torch_ref(q, node, call=False)
        if q and isinstance(node.ctx, ast.Load):
            if any(q.startswith(m + ".") or q == m for m in ("torch.backends",)) and node.attr.startswith("allow_"):
                self.add("precision", node, f"{q} changes matmul/conv precision; not allowed.")
        self.generic_visit(node)

    def _used_as_key(self, node: ast.AST) -> bool:
        parent = getattr(node, "_parent", None)
        # x.data_ptr() -> Call; look at the call's parent
        if isinstance(parent, ast.Call):
            parent = getattr(parent, "_parent", None)
        return isinstance(parent, (ast.Subscript, ast.Compare, ast.Dict, ast.Tuple, ast.Call, ast.Assign,
                                   ast.JoinedStr, ast.FormattedValue, ast.keyword))

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self.check_store(t, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_store(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_store(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.check_store(t, node)
        self.generic_visit(node)

    def check_store(self, target: ast.AST, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.check_store(elt, node)
            return
        if isinstance(target, ast.Attribute):
            q = self.qualname(target.value)
            if q is not None:
                self.patched(q, target.attr, node)
            elif _is_name(target.value, "self") and self.in_function and not self.in_init:
                self.add("memoisation", node, f"self.{target.attr} is assigned outside __init__: state kept across "
                         "calls (caching or call counting) is not allowed.")
            elif self.receiver_root(target) in self.module_containers:
                self.add("memoisation", node, "A module-level object is modified: state kept across calls.")
        elif isinstance(target, ast.Subscript):
            q = self.qualname(target.value)
            if q in ("os.environ",):
                key = target.slice.value if isinstance(target.slice, ast.Constant) else None
                if key not in ENV_KEYS_ALLOWED:
                    self.add("io", node, f"os.environ[{key!r}] is changed; submissions may not change the environment.")
            elif q is not None and q.startswith("sys"):
                self.add("checker-patch", node, f"{q}[...] is replaced; submissions may not patch modules.")
            elif self.receiver_root(target) in self.module_containers and self.in_function:
                self.add("memoisation", node, f"Module-level {self.receiver_root(target)} is filled inside a "
                         "function: a cache across calls.")
            elif _is_name(_base(target), "self") and self.in_function and not self.in_init:
                self.add("memoisation", node, "An attribute of self is modified outside __init__: a cache across calls.")
        elif isinstance(target, ast.Name) and target.id in ("__builtins__",):
            self.add("checker-patch", node, "__builtins__ is replaced; not allowed.")

    def patched(self, owner: str, attr: str, node: ast.AST) -> None:
        full = f"{owner}.{attr}"
        if any(full == m or full.startswith(m + ".") or owner == m or owner.startswith(m + ".") for m in TIMER_MODULES):
            self.add("timer-patch", node, f"{full} is reassigned; timing functions may not be patched.")
        elif owner.startswith("torch.backends") and attr.startswith("allow_"):
            self.add("precision", node, f"{full} is changed: this lowers matmul/conv precision.")
        else:
            self.add("checker-patch", node, f"{full} is reassigned; attributes of modules may not be patched.")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        func._is_call = True  # type: ignore[attr-defined]
        name = _call_name(node)
        q = self.qualname(func)
        if isinstance(func, ast.Name) and func.id in INTROSPECTION_BUILTINS and func.id not in self.aliases:
            self.add("introspection", node, f"{func.id}() runs or inspects code dynamically; not allowed.")
        if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
            owner = self.qualname(node.args[0])
            attr = node.args[1].value if len(node.args) > 1 and isinstance(node.args[1], ast.Constant) else "?"
            if owner is not None:
                self.patched(owner, str(attr), node)
            elif not _is_name(node.args[0], "self"):
                self.add("checker-patch", node, f"{func.id}() on a non-self object can patch modules; not allowed.")
            elif self.in_function and not self.in_init:
                self.add("memoisation", node, f"{func.id}(self, ...) outside __init__ keeps state across calls.")
        if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
            owner = self.qualname(node.args[0])
            if owner is not None and not isinstance(node.args[1], ast.Constant):
                self.add("introspection", node, f"getattr({owner}, <computed name>) hides what is called; not allowed.")
        if isinstance(func, ast.Name) and func.id == "open" and "open" not in self.aliases:
            self.add("io", node, "open() reads or writes files; submissions may not do file I/O.")
        if isinstance(func, ast.Name) and func.id == "id" and "id" not in self.aliases and self._used_as_key(func):
            if self.in_function and not self.in_init:
                self.add("memoisation", node, "id(...) used as a key caches results by object identity.")
        if isinstance(func, ast.Name) and (func.id in self.reference_names or func.id == "Model"):
            if func.id not in self.aliases or func.id in self.reference_names:
                self.add("fallback", node, "The reference Model is instantiated; write ModelNew from scratch.")
        if q is not None:
            self.check_call_qualname(q, node)
        elif isinstance(func, ast.Attribute):
            self.check_method(func, node)
        self.check_load_inline(q, node)
        self.generic_visit(node)

    def check_call_qualname(self, q: str, node: ast.Call) -> None:
        top = q.split(".")[0]
        if q.startswith("torch."):
            self.check_torch_ref(q, node, call=True)
            if q.endswith(".to") or q in ("torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.tensor",
                                          "torch.empty_like", "torch.zeros_like", "torch.full_like", "torch.ones_like"):
                self.check_dtype_args(node)
        elif top == "os":
            leaf = q.split(".")[-1]
            if leaf in OS_PROCESS:
                self.add("thread", node, f"{q}() starts processes; not allowed.")
            elif q.startswith("os.environ."):
                if leaf not in ("get", "__getitem__", "copy", "keys", "items", "values"):
                    self.add("io", node, f"{q}() changes the environment; not allowed.")
            elif not any(q == a or q.startswith(a + ".") for a in OS_ALLOWED):
                self.add("io", node, f"{q}() touches the operating system or files; not allowed.")
        elif top == "sys" and q.split(".")[-1] in ("settrace", "setprofile", "_getframe", "setrecursionlimit",
                                                   "setswitchinterval", "addaudithook"):
            self.add("introspection", node, f"{q}() hooks the interpreter; not allowed.")
        elif top in ("numpy", "scipy", "jax", "cupy", "numba", "triton", "tensorflow"):
            self.add("torch-compute", node, f"{q}() computes outside your kernels; write the kernel yourself.")
        elif top == "cuda_gym":
            self.add("checker-patch", node, "Submissions may not call into the judge (cuda_gym).")

    def check_method(self, func: ast.Attribute, node: ast.Call) -> None:
        root = self.receiver_root(func.value)
        if root is not None and (root in self.extension_names or root in self.aliases):
            return
        attr = func.attr
        if _is_name(func.value, "self") and attr in self.layer_attrs:
            self.add("torch-compute", node, f"self.{attr}(...) runs a PyTorch layer; layers may only hold parameters.")
            return
        if attr == "forward" and isinstance(func.value, ast.Attribute) and _is_name(func.value.value, "self") \
                and func.value.attr in self.layer_attrs:
            self.add("torch-compute", node, f"self.{func.value.attr}.forward(...) runs a PyTorch layer.")
            return
        if attr == "forward" and isinstance(func.value, ast.Call) and _call_name(func.value) == "super":
            self.add("fallback", node, "super().forward(...) runs the parent's PyTorch forward.")
            return
        if self.in_init:
            return
        if attr in COMPUTE_METHODS:
            self.add("torch-compute", node, f".{attr}(...) is a PyTorch compute method; call your kernel instead.")
        elif attr in ("cpu", "numpy", "tolist") and self.config.flavour == "cuda":
            self.add("host-compute", node, f".{attr}() moves data to the host; compute in your CUDA kernels.")
        elif attr in ("half", "bfloat16") and self.config.precision == "fp32":
            self.add("precision", node, f".{attr}() lowers the precision of an fp32 task.")
        elif attr in ("to", "type"):
            self.check_dtype_args(node)

    def check_dtype_args(self, node: ast.Call) -> None:
        if self.config.precision != "fp32":
            return
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            q = self.qualname(arg) or ""
            if q.split(".")[-1] in LOW_PRECISION_DTYPES:
                self.add("precision", node, f"Conversion to {q} lowers the precision of an fp32 task.")

    def check_torch_ref(self, q: str, node: ast.AST, *, call: bool) -> None:
        if q in STREAM_NAMES or any(q.startswith(s + ".") for s in STREAM_NAMES):
            if q != "torch.cuda.Event" or call:
                self.add("stream", node, f"{q} creates streams, events or graphs; use the current stream only.")
            return
        if q.startswith(("torch.autocast", "torch.cuda.amp", "torch.amp", "torch.set_float32_matmul_precision",
                         "torch.set_default_dtype", "torch.backends")):
            if call or q.startswith("torch.backends") is False:
                if q.startswith("torch.backends") and not q.split(".")[-1].startswith("allow_"):
                    return
                self.add("precision", node, f"{q} changes numerical precision; not allowed.")
            return
        if q.startswith(("torch.save", "torch.load", "torch.hub", "torch.distributed")):
            self.add("io", node, f"{q} does I/O or communication; not allowed.")
            return
        if q.startswith(("torch.multiprocessing",)):
            self.add("thread", node, f"{q} starts processes; not allowed.")
            return
        if q.startswith(("torch.utils._python_dispatch", "torch.overrides", "torch.Tensor._make_subclass",
                         "torch.Tensor._make_wrapper_subclass", "torch._C._DisableTorchDispatch")):
            self.add("tensor-subclass", node, f"{q} enables tensor subclasses or dispatch hooks; not allowed.")
            return
        if q.startswith("torch.ops."):
            ns = q.split(".")[2] if q.count(".") >= 2 else ""
            if ns in TORCH_OPS_NAMESPACES:
                self.add("torch-compute", node, f"{q} is a PyTorch operator; call your own kernel instead.")
            return
        if q.startswith("torch._C._nn") or q.startswith("torch._C._VariableFunctions") or q.startswith(
                "torch._C._linalg") or q.startswith("torch._C._fft") or q.startswith("torch._C._special"):
            self.add("torch-compute", node, f"{q} is a PyTorch operator; call your own kernel instead.")
            return
        if q.startswith("torch._C") or q.startswith("torch._dynamo") or q.startswith("torch._inductor") or \
                q.startswith("torch.compile") or q.startswith("torch.jit"):
            rule = "introspection" if q.startswith("torch._C") else "torch-compute"
            self.add(rule, node, f"{q} is internal machinery or a compiler; not allowed in a submission.")
            return
        if q in TORCH_ALLOWED_CALLS or q.startswith("torch.utils.cpp_extension"):
            return
        if q in TORCH_RANDOM_INIT and (self.in_init or not self.in_function):
            return
        if q.startswith("torch.nn.init."):
            if not self.in_init and self.in_function:
                self.add("torch-compute", node, f"{q} in forward is PyTorch compute.")
            return
        obj = _torch_object(q)
        if obj is None:
            return
        if _is_layer_class(obj):
            if not call:
                return
            if obj.__module__.startswith("torch.nn.modules") and not self.in_function:
                self.add("torch-compute", node, f"{q} is created at module level; layers may only hold parameters in __init__.")
            return
        import torch
        import types

        if isinstance(obj, (torch.dtype, torch.device, torch.layout, torch.memory_format, types.ModuleType)):
            if isinstance(obj, torch.dtype) and str(obj).split(".")[-1] in LOW_PRECISION_DTYPES and \
                    self.config.precision == "fp32" and not call:
                parent = getattr(node, "_parent", None)
                if isinstance(parent, (ast.keyword, ast.Call)):
                    self.add("precision", node, f"{q} lowers the precision of an fp32 task.")
            return
        if isinstance(obj, type) and not call:
            return
        if isinstance(obj, type) and issubclass(obj, (torch.Tensor,)):
            if q in ("torch.Tensor", "torch.FloatTensor"):
                self.add("torch-compute", node, f"{q}(...) builds tensors from data; use torch.empty.")
            return
        if callable(obj) or q.startswith("torch.nn.functional") or q.startswith("torch.Tensor."):
            self.add("torch-compute", node, f"{q} is PyTorch compute; only allocation, views and metadata are allowed.")

    def check_load_inline(self, q: str | None, node: ast.Call) -> None:
        if not q or not q.endswith(("cpp_extension.load_inline", "cpp_extension.load")):
            return
        for kw in node.keywords:
            if kw.arg in ("cpp_sources", "cuda_sources"):
                for text, line in self.resolve_strings(kw.value):
                    self.cpp_sources.append((text, line, kw.arg == "cuda_sources"))
            elif kw.arg in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
                for text, line in self.resolve_strings(kw.value):
                    if any(flag in text for flag in FAST_MATH_FLAGS) and self.config.precision == "fp32":
                        self.add("precision", kw.value, f"Compiler flag {text!r} enables fast math; not allowed.")
            elif kw.arg == "sources" and self.root is not None:
                for text, _ in self.resolve_strings(kw.value):
                    self.add("include", kw.value, f"load(sources=...) reads {text}; put sources in kernels/ or "
                             "use load_inline.")
        if q.endswith("load_inline"):
            for i, arg in enumerate(node.args[1:3]):
                for text, line in self.resolve_strings(arg):
                    self.cpp_sources.append((text, line, i == 1))

    def resolve_strings(self, node: ast.AST) -> list[tuple[str, int]]:
        if isinstance(node, (ast.List, ast.Tuple)):
            return [s for elt in node.elts for s in self.resolve_strings(elt)]
        if isinstance(node, ast.Name):
            return list(self.strings.get(node.id, []))
        text = _string_value(node)
        if text is not None:
            return [(text, getattr(node, "lineno", 1))]
        if isinstance(node, ast.BinOp):
            return self.resolve_strings(node.left) + self.resolve_strings(node.right)
        return []


def _string_value(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else " 0 " for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left), _string_value(node.right)
        if left is not None and right is not None:
            return left + right
    return None


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _base(node: ast.AST) -> ast.AST:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node


def _target_names(t: ast.AST) -> list[str]:
    if isinstance(t, ast.Name):
        return [t.id]
    if isinstance(t, ast.Attribute):
        return [t.attr]
    if isinstance(t, (ast.Tuple, ast.List)):
        return [n for e in t.elts for n in _target_names(e)]
    return []


def _is_import_guard(node: ast.Try) -> bool:
    """A module-level ``try: import x / except ImportError: import y`` with only imports inside."""
    for h in node.handlers:
        names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
        if h.type is None or not all(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
                                     for n in names):
            return False
    body = [*node.body, *(s for h in node.handlers for s in h.body), *node.orelse, *node.finalbody]
    return all(isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) for s in body)


def check_python(text: str, file: str, config: RuleConfig | None = None, *, root: Path | None = None) -> list[Violation]:
    """Check one Python source (``model_new.py`` or a single-file submission), with its inline C++."""
    config = config or RuleConfig()
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError as exc:
        logger.debug("syntax error in %s: %s", file, exc)
        return []  # the candidate worker reports the SyntaxError itself
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._parent = parent  # type: ignore[attr-defined]
    checker = _PyChecker(file, config, root)
    checker.prepass(tree)
    checker.visit(tree)
    found = checker.found
    seen: set[tuple[str, int]] = set()
    for source, line, is_cuda in checker.cpp_sources:
        if (source, line) in seen:
            continue
        seen.add((source, line))
        for v in check_cpp(source, file, config, root=None, device_code=is_cuda):
            found.append(Violation(v.rule, v.message + " (inline source)", file, line + (v.line or 1) - 1))
    return found


# --------------------------------------------------------------------------------------------
# C++ / CUDA
# --------------------------------------------------------------------------------------------


def strip_cpp(text: str) -> tuple[str, str]:
    """Return ``(no_comments, code_only)``: comments blanked, then also string/char literals blanked.

    Newlines are kept, so offsets and line numbers match the original text.
    """
    out_nc: list[str] = []
    out_code: list[str] = []
    i, n = 0, len(text)

    def blank(s: str) -> str:
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out_nc.append(blank(text[i:j]))
            out_code.append(blank(text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out_nc.append(blank(text[i:j]))
            out_code.append(blank(text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i + m.end())
                j = n if end < 0 else end + len(m.group(1)) + 2
                out_nc.append(text[i:j])
                out_code.append('R"' + blank(text[i + 2 : j - 1]) + '"')
                i = j
            else:
                out_nc.append(c)
                out_code.append(c)
                i += 1
        elif c in "\"'":
            if c == "'" and i > 0 and (text[i - 1].isalnum()) and re.match(r"'\d", text[i:]):
                out_nc.append(c)  # digit separator 1'000
                out_code.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out_nc.append(text[i:j])
            out_code.append(c + blank(text[i + 1 : j - 1]) + (text[j - 1] if j - 1 > i else ""))
            i = j
        else:
            out_nc.append(c)
            out_code.append(c)
            i += 1
    return "".join(out_nc), "".join(out_code)


ATEN_ALLOWED = frozenset(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob
    dtype device scalar_type TensorOptions Tensor Scalar ScalarType Device DeviceType IntArrayRef Layout
    MemoryFormat Half BFloat16 Generator OptionalIntArrayRef optional nullopt kCUDA kCPU
    getCurrentCUDAStream getDefaultCUDAStream getCurrentCUDABlasHandle getCurrentCUDABlasLtHandle
    getCurrentDeviceProperties getDeviceProperties current_device CUDAGuard OptionalCUDAGuard DeviceGuard
    OptionalDeviceGuard CUDAStream check_cuda_error detail indexing Slice None Ellipsis TensorAccessor
    PackedTensorAccessor32 PackedTensorAccessor64 RestrictPtrTraits DefaultPtrTraits elementSize
    toString typeMetaToScalarType get_num_threads getCurrentCUDASolverDnHandle""".split()
)
"""``at::``/``torch::`` names allowed in C++: allocation, options, devices, current stream, accessors."""

CPP_COMPUTE_METHODS = COMPUTE_METHODS - {"max", "min", "all", "any", "count_nonzero", "round", "floor", "ceil",
                                           "sign", "trace", "mode", "eq", "ne", "lt", "le", "gt", "ge", "where",
                                           "norm", "dot", "cross", "sqrt", "sin", "cos", "exp", "log", "abs",
                                           "pow", "tan", "diag"}

CUBLAS_ALLOWED = re.compile(
    r"^cublas(Lt)?(Create|Destroy|SetStream|GetStream|SetMathMode|GetMathMode|SetPointerMode|GetPointerMode|"
    r"SetWorkspace|GetStatusString|GetStatusName|GetVersion|GetProperty|[SDHCZ]gemm\w*|Gemm\w*|[SDCZ]gemv\w*|"
    r"[SDCZ]symm|[SDCZ]syrk|[SDCZ]trmm|Matmul\w*|MatrixLayout\w*|MatmulDesc\w*|MatmulPreference\w*|"
    r"MatmulAlgo\w*|LoggerSet\w*)$"
)
CUDNN_ALLOWED = re.compile(
    r"^cudnn(Create|Destroy|SetStream|GetStream|GetErrorString|GetVersion|GetCudartVersion|"
    r"(Create|Destroy|Set|Get)(Tensor|Tensor4d|TensorNd|Filter|Filter4d|FilterNd|Convolution|Convolution2d|"
    r"ConvolutionNd|Activation)\w*|(Create|Destroy)\w*Descriptor|\w*Convolution\w*|GetConvolution\w*|"
    r"FindConvolution\w*|ConvolutionBiasActivationForward)$"
)

_TENSOR_METHOD = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*\(")
_NS_CALL = re.compile(r"\b(at|torch|ATen)\s*::\s*((?:\w+\s*::\s*)*)(\w+)")
_CUBLAS = re.compile(r"\b(cublas(?:Lt)?[A-Z]\w*|cudnn[A-Z]\w*)\s*\(")
_OTHER_LIBS = re.compile(r"\b(cblas_\w+|mkl_\w+|cufft\w+|cusparse\w+|cusolver\w+|curand\w+|Eigen\s*::|dnnl\w*|"
                         r"cudnn_frontend\s*::|cutlass\s*::\s*library\w*)")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _function_headers(code: str) -> list[tuple[int, int, str]]:
    """Top-level function bodies as (start, end, header) in code with comments and strings blanked."""
    spans: list[tuple[int, int, str]] = []
    stack: list[tuple[int, str, bool]] = []
    last_stmt = 0
    for i, c in enumerate(code):
        if c == "{":
            header = code[last_stmt:i]
            transparent = bool(re.search(r"\bnamespace\b|\bextern\s*\"?|\bstruct\b|\bclass\b", header)) and "(" not in header
            stack.append((i, header, transparent))
            last_stmt = i + 1
        elif c == "}":
            if stack:
                start, header, transparent = stack.pop()
                if not transparent and all(t for _, _, t in stack):
                    spans.append((start, i, header))
            last_stmt = i + 1
        elif c == ";" and (not stack or all(t for _, _, t in stack)):
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


def check_cpp(
    text: str,
    file: str,
    config: RuleConfig | None = None,
    *,
    root: Path | None = None,
    device_code: bool = True,
) -> list[Violation]:
    """Check one C++/CUDA source (comment and string aware) and return its violations."""
    config = config or RuleConfig()
    nc, code = strip_cpp(text)
    found: list[Violation] = []

    def add(rule: str, pos: int, message: str) -> None:
        found.append(Violation(rule, message, file, _line_of(code, pos)))

    fp32 = config.precision == "fp32"
    cuda = config.flavour == "cuda"
    spans = _function_headers(code)

    # preprocessor lines, with strings intact
    for m in re.finditer(r"(?m)^[ \t]*#[ \t]*(\w+)(.*)$", nc):
        directive, rest = m.group(1), m.group(2).strip()
        if directive in ("include", "include_next", "import", "embed"):
            if directive == "embed":
                add("include", m.start(), "#embed pulls a file into the binary; not allowed.")
                continue
            target = rest[1:].split(rest[0] == "<" and ">" or '"')[0] if rest[:1] in '<"' else rest
            problem = _bad_include(target, rest[:1] == "<", file, root)
            if problem:
                add("include", m.start(), problem)
            elif re.search(r"(^|/)(cblas|mkl|Eigen|eigen3|dnnl|oneapi|openblas|lapack)", target):
                add("library-compute", m.start(), f"#include <{target}>: math libraries are not allowed.")
            elif re.match(r"(thread|future|pthread\.h)$", target):
                add("thread", m.start(), f"#include <{target}>: host threads are not allowed.")
            elif re.match(r"(fstream|dlfcn\.h|sys/ptrace\.h|sys/socket\.h|unistd\.h|spawn\.h)$", target):
                rule = "introspection" if target in ("dlfcn.h", "sys/ptrace.h") else "io" if target in (
                    "fstream", "sys/socket.h") else "thread"
                add(rule, m.start(), f"#include <{target}>: files, processes or dynamic loading are not allowed.")
            elif cuda is False and re.match(r"(cublas|cudnn|cuda)", target):
                add("library-compute", m.start(), f"#include <{target}> on the cpu flavour; write plain C++.")
        elif directive == "pragma":
            low = rest.lower()
            if re.search(r"fast.?math|ofast|unsafe.math|float_control|fenv_access|clang\s+fp\b|optimize", low) and fp32:
                add("precision", m.start(), f"#pragma {rest} changes floating-point semantics; not allowed.")
            elif low.startswith("omp") and cuda:
                add("thread", m.start(), "OpenMP is allowed only on the cpu flavour; use CUDA kernels.")
            elif low.startswith(("comment", "gcc push_options", "gcc target")):
                add("include", m.start(), f"#pragma {rest} changes linking or code generation; not allowed.")

    # asm: strings (asm bodies) and placement
    for m in re.finditer(r"\b(asm|__asm__|__asm)\b\s*(volatile|__volatile__)?\s*\(", code):
        body = nc[m.end(): nc.find(";", m.end()) if nc.find(";", m.end()) > 0 else len(nc)]
        if not device_code or not _in_device_function(spans, m.start()):
            add("introspection", m.start(), "Inline assembly in host code is not allowed.")
        elif ".incbin" in body:
            add("include", m.start(), ".incbin embeds a file; not allowed.")
        elif fp32 and re.search(r"\btf32\b|\.f16\b|\.bf16\b|\.e4m3|\.e5m2|\.f16x2|\.bf16x2|cvt\.rn\.f16", body):
            add("precision", m.start(), "Inline PTX with half/bf16/tf32 types lowers the precision of an fp32 task.")

    # torch / ATen in C++
    for m in _NS_CALL.finditer(code):
        inner, leaf = re.sub(r"\s", "", m.group(2)), m.group(3)
        full = f"{m.group(1)}::{inner}{leaf}"
        if inner.startswith("native") or leaf == "native":
            add("torch-compute", m.start(), f"{full} is ATen compute; write the kernel yourself.")
            continue
        if leaf in ("getStreamFromPool", "setCurrentCUDAStream", "getStreamFromExternal", "CUDAStreamGuard",
                    "CUDAMultiStreamGuard"):
            add("stream", m.start(), f"{full} uses a non-current stream; launch on the current stream.")
            continue
        if leaf in ("set_num_threads", "parallel_for", "launch", "intraop_launch", "parallel_reduce"):
            add("thread", m.start(), f"{full} runs PyTorch's thread pool; use OpenMP (cpu) or CUDA kernels.")
            continue
        if leaf in ATEN_ALLOWED or re.match(r"k[A-Z]\w*$", leaf) or leaf[:1].isupper() or inner in (
                "indexing::", "detail::"):
            continue
        if inner.startswith(("cuda::",)) and leaf in ATEN_ALLOWED:
            continue
        add("torch-compute", m.start(), f"{full} is PyTorch compute in C++; only allocation (torch::empty...), "
            "views and metadata are allowed.")

    for m in _TENSOR_METHOD.finditer(code):
        name = m.group(1)
        if name in CPP_COMPUTE_METHODS or name in ("matmul", "mm", "bmm", "addmm", "conv2d", "softmax", "relu",
                                                    "sigmoid", "tanh", "sum", "mean", "exp", "log", "sqrt",
                                                    "pow", "abs", "clamp", "max", "min", "norm", "where", "gelu"):
            if _in_device_function(spans, m.start()) if device_code else False:
                continue
            prefix = code[max(0, m.start() - 40): m.start()]
            if re.search(r"(std|thrust|cub|numeric_limits<[^>]*>)\s*$", prefix):
                continue
            add("torch-compute", m.start(), f".{name}(...) on a tensor is PyTorch compute in C++; call your kernel.")
        elif name in ("to", "toType", "half", "bfloat16") and fp32:
            args = code[m.end(): code.find(")", m.end())]
            if name in ("half", "bfloat16") or re.search(r"k(Half|BFloat16|Float16)\b", args):
                add("precision", m.start(), f".{name}(...) lowers the precision of an fp32 task.")

    if cuda:
        for m in re.finditer(r"(\.\s*cpu\s*\(|\bkCPU\b|cudaMemcpyDeviceToHost|\.\s*numpy\s*\()", code):
            add("host-compute", m.start(), f"{m.group(1).strip()} moves data to the host; compute in CUDA kernels.")

    # vendor libraries
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
    if fp32:
        for m in re.finditer(r"\b(CUBLAS_COMPUTE_32F_FAST_\w+|CUBLAS_COMPUTE_16F\w*|CUBLAS_TF32_TENSOR_OP_MATH|"
                             r"CUBLAS_TENSOR_OP_MATH|CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION|CUDNN_DATA_HALF|"
                             r"CUDNN_DATA_BFLOAT16|CUDA_R_16F|CUDA_R_16BF|CUDA_R_8F\w*)\b", code):
            add("precision", m.start(), f"{m.group(1)} lowers the precision of an fp32 task.")
        for m in re.finditer(r"\b(__float2half\w*|__floats2half2\w*|__float22half2\w*|__float2bfloat16\w*|"
                             r"__floats2bfloat162\w*|__float22bfloat162\w*|__float_to_tf32|__float2tf32|"
                             r"__nv_cvt_float\w*|__double2half\w*|__double2bfloat16\w*|__nv_fp8\w*|"
                             r"wmma\s*::\s*precision\s*::\s*tf32|static_cast\s*<\s*(?:__)?(?:half|nv_bfloat16|"
                             r"__nv_bfloat16|c10::Half|at::Half|c10::BFloat16|at::BFloat16)\s*>|"
                             r"\(\s*(?:__)?(?:half|__nv_bfloat16|nv_bfloat16)\s*\)\s*[\w(])", code):
            add("precision", m.start(), f"{m.group(1).strip()} converts to a lower precision than the fp32 task.")
        for m in re.finditer(r"__attribute__\s*\(\s*\(\s*optimize", code):
            add("precision", m.start(), "__attribute__((optimize(...))) changes code generation; not allowed.")

    # streams, graphs, callbacks, mapped memory
    for m in re.finditer(r"\b(cudaStreamCreate\w*|cudaStreamPerThread|cudaStreamBeginCapture\w*|cudaGraph\w+|"
                         r"cudaLaunchHostFunc|cudaStreamAddCallback|cudaHostGetDevicePointer|cudaHostAllocMapped|"
                         r"cudaHostRegister\w*|cudaSetDeviceFlags|cudaDeviceScheduleSpin|cudaStreamNonBlocking|"
                         r"cuStreamCreate\w*|cuGraph\w+|cuLaunchHostFunc|cudaMallocManaged|"
                         r"cudaLaunchCooperativeKernelMultiDevice|cuda::std::thread)\b", code):
        add("stream", m.start(), f"{m.group(1)} can run work outside the timed stream; use the current stream only.")

    # threads and processes
    thread_pat = r"\b(?:(std\s*::\s*(?:thread|jthread|async|packaged_task|system)|tbb\s*::|boost\s*::\s*thread)\b|" \
                 r"(pthread_\w+|fork|vfork|posix_spawnp?|system|popen|execv\w*|execl\w*|clone|kill)\s*\()"
    for m in re.finditer(thread_pat, code):
        name = re.sub(r"\s", "", m.group(1) or m.group(2))
        prefix = code[max(0, m.start() - 2): m.start()]
        if name in ("clone", "kill", "system") and re.search(r"(\.|->|::)\s*$", prefix):
            continue
        add("thread", m.start(), f"{name}: host threads and processes are not allowed.")
    if cuda:
        for m in re.finditer(r"\bomp_\w+\s*\(", code):
            add("thread", m.start(), "OpenMP is allowed only on the cpu flavour.")

    # introspection and io
    for m in re.finditer(r"\b(dlopen|dlsym|dlmopen|ptrace|process_vm_readv|process_vm_writev|syscall|mprotect|"
                         r"PyEval_\w+|PyRun_\w+|PyImport_\w+|PyObject_GetAttr\w*|PyObject_SetAttr\w*|"
                         r"py\s*::\s*module_?\s*::\s*import|py\s*::\s*eval|py\s*::\s*exec|py\s*::\s*globals|"
                         r"pybind11\s*::\s*module_?\s*::\s*import|pybind11\s*::\s*eval|pybind11\s*::\s*exec)\b", code):
        add("introspection", m.start(), f"{m.group(1)}: dynamic loading, tracing or Python access is not allowed.")
    for m in re.finditer(r"\b(fopen|freopen|fwrite|fread|std\s*::\s*[io]?fstream|ifstream|ofstream|"
                         r"getenv|setenv|putenv|unsetenv|socket|connect|open|openat|creat|unlink|remove|rename|"
                         r"mmap|shm_open|CUDA_LAUNCH_BLOCKING)\s*[(<:]", code):
        name = re.sub(r"\s", "", m.group(1))
        prefix = code[max(0, m.start() - 2): m.start()]
        if re.search(r"(\.|->)\s*$", prefix):
            continue
        add("io", m.start(), f"{name}: files, environment and network are not allowed.")

    # memoisation: static or global pointers/tensors/maps
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
    return found


def _inside_function(spans: list[tuple[int, int, str]], pos: int) -> bool:
    return any(start <= pos <= end for start, end, _ in spans)


_SYSTEM_HEADER = re.compile(r"^[\w./+-]+$")
HEADER_SUFFIXES = ("", ".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".inc", ".tcc", ".ipp")


def _bad_include(target: str, angle: bool, file: str, root: Path | None) -> str | None:
    """Why an #include target is not allowed, or None."""
    if not target:
        return "An #include without a plain file name is not allowed."
    escapes = ".." in Path(target).parts
    if escapes and not angle:
        if root is not None:
            escapes = not ((root / file).parent / target).resolve().is_relative_to(root.resolve())
        else:  # no workspace known: kernels/x.cpp may still reach the root's own headers
            escapes = Path(target).parts.count("..") > 1 or Path(target).parts[0] != ".."
    if target.startswith("/") or target.startswith("~") or escapes or "\\" in target:
        return f"#include {target!r} reaches outside the workspace; include only your own and system headers."
    suffix = Path(target).suffix
    if suffix not in HEADER_SUFFIXES:
        return f"#include {target!r} is not a header; include only headers (.h, .cuh, .hpp)."
    if not _SYSTEM_HEADER.match(target):
        return f"#include {target!r} has an unusual name; include plain header names."
    if not angle and root is not None:
        candidate = (root / file).parent / target
        try:
            resolved = candidate.resolve()
        except OSError:
            return None
        if candidate.exists() and not resolved.is_relative_to(root.resolve()):
            return f"#include {target!r} resolves outside the workspace."
    return None
