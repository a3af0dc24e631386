"""Policy tables of the static rules: rule names, allow-lists and deny-lists (data, no logic)."""

from __future__ import annotations

import re
from dataclasses import dataclass

RULES: dict[str, str] = {
    "torch-compute": "PyTorch does the work: torch/F/aten calls, tensor math methods, nn layers called, "
    "at::/torch:: compute in C++. Only allocation, views and metadata are allowed.",
    "library-compute": "A vendor library does the work: cuBLAS beyond GEMM, cuDNN beyond convolution, "
    "any BLAS/cuBLAS/cuDNN on the cpu flavour, other math libraries.",
    "timer-patch": "Something assigns to or patches timing functions (torch.cuda events, synchronize, time).",
    "checker-patch": "Something assigns to attributes of torch, builtins or other modules (comparators); C++ "
    "dispatch-key guards (c10::impl::ExcludeDispatchKeyGuard...) that hide PyTorch ops from the audit.",
    "introspection": "gc, inspect, frames, ctypes, eval/exec, __import__, dunder reflection, ptrace, host asm.",
    "native-python": "C++ that reaches Python: the CPython C API (PyObject*, Py_*, PyRun_*, PyImport_*...), "
    "pybind11 beyond defining functions (py::module_::import, py::eval/exec, py::globals, py::object, "
    ".attr()), aliases of pybind11, dlopen/dlsym, Python headers.",
    "thread": "Threads: threading, std::thread, std::async, pthreads, TBB; OpenMP outside the cpu flavour; "
    "signal handlers and timers in C++ (sigaction, signal, timer_create, setitimer, alarm, <signal.h>).",
    "process": "Processes: subprocess, multiprocessing, os.fork/system/exec*, and in C++ fork, vfork, clone, "
    "posix_spawn, system, popen, exec*.",
    "l2-persist": "Persisting-L2 controls that survive the judge's cache flush: access-policy windows "
    "(cudaStreamSetAttribute, cudaStreamAttrValue), cudaLimitPersistingL2CacheSize, "
    "cudaCtxResetPersistingL2Cache, cudaAccessPropertyPersisting, cuStreamSetAttribute, cuCtxSetLimit.",
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
    "include": "#include of a file outside the workspace or of a non-header file; .incbin/#embed; "
    "an #include whose file name is a macro; pragmas that change linking, code generation or macros.",
    "unreadable": "A file the static checker cannot read: a link, not a regular file, too large, or nested "
    "too deeply to parse; load_inline sources it cannot resolve statically.",
}
"""Every rule name this module reports, with a one-line description (see docs/rules.md)."""

SOURCE_SUFFIXES = (".cu", ".cpp")
"""Suffixes of the translation units the build compiles (``kernels/*.cu``, ``kernels/*.cpp``)."""

HEADER_SUFFIXES = ("", ".h", ".hpp", ".hh", ".hxx", ".cuh", ".inl", ".inc", ".tcc", ".ipp")
"""Suffixes an ``#include`` may name; any other is an ``include`` violation."""

DEVICE_SUFFIXES = (".cu", ".cuh")
"""Files whose functions may be ``__device__``/``__global__`` code (inline PTX allowed there)."""

MAX_SOURCE_BYTES = 2 * 2**20
"""Largest file the checker reads; a larger one is ``unreadable`` (no kernel source needs more)."""

INFRA_FILES = frozenset({"binding.cpp", "binding_registry.h"})
"""Workspace infrastructure in the root (read-only, checked for tampering by the workspace, not here)."""

SKIP_PY = frozenset({"model.py"})
"""Python files in a workspace root that are not the agent's (the read-only reference)."""


@dataclass(frozen=True)
class RuleConfig:
    """Options of the static checker."""

    flavour: str = "cuda"
    """``cuda`` (cuBLAS GEMM and cuDNN convolution allowed) or ``cpu`` (OpenMP allowed, no libraries)."""
    precision: str = "fp32"
    """The task's precision; ``fp32`` forbids half/bf16/tf32 conversions and fast-math."""


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
THREAD_MODULES = frozenset({"threading", "_thread", "concurrent", "signal", "atexit", "asyncio", "sched"})
PROCESS_MODULES = frozenset({"multiprocessing", "subprocess", "pty", "torch.multiprocessing", "joblib"})
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


ATEN_ALLOWED = frozenset(
    """empty empty_like empty_strided zeros zeros_like ones ones_like full full_like from_blob
    dtype device scalar_type TensorOptions Tensor Scalar ScalarType Device DeviceType IntArrayRef Layout
    MemoryFormat Half BFloat16 Generator OptionalIntArrayRef optional nullopt kCUDA kCPU
    getCurrentCUDAStream getDefaultCUDAStream getCurrentCUDABlasHandle getCurrentCUDABlasLtHandle
    getCurrentDeviceProperties getDeviceProperties current_device CUDAGuard OptionalCUDAGuard DeviceGuard
    OptionalDeviceGuard CUDAStream check_cuda_error detail indexing Slice None Ellipsis TensorAccessor
    PackedTensorAccessor32 PackedTensorAccessor64 RestrictPtrTraits DefaultPtrTraits elementSize
    toString typeMetaToScalarType get_num_threads getCurrentCUDASolverDnHandle wrap_pybind_function""".split()
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


PYBIND_ALLOWED = frozenset(
    """module_ module arg arg_v kw_only pos_only return_value_policy call_guard gil_scoped_release
    overload_cast const_ none""".split()
)
"""``pybind11::``/``py::`` names a binding may use: defining functions on the module it is handed.
Anything else of pybind11 (``object``, ``handle``, ``dict``, ``cast``, ``eval``, ``module_::import``...) is
``native-python``."""

NATIVE_PYTHON_HEADERS = re.compile(r"^(Python\.h|pybind11/(embed|eval|exec|numpy|iostream)\.h|"
                                   r"torch/python\.h|torch/csrc/(utils/python|autograd/python|Dynamo|"
                                   r"utils/pybind)\w*|frameobject\.h|structmember\.h|dlfcn\.h)")
"""Headers whose only use is reaching the interpreter (or loading libpython) from native code."""
