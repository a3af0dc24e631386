"""C++ checks of the static rules (cuda_gym.judge.rules.cpp_checks) and the C/C++ lexer, on real sources."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cuda_gym.judge.rules import RuleConfig, check_cpp, check_submission, strip_cpp


def cpp_rules(code: str, flavour: str = "cuda", device: bool = True) -> set[str]:
    return {v.rule for v in check_cpp(textwrap.dedent(code), "k.cu", RuleConfig(flavour=flavour), device_code=device)}


def test_strip_cpp_keeps_lines() -> None:
    src = 'int a; // at::matmul\n/* x.relu()\n */ const char* s = "torch::mm(";\nauto r = R"(at::bmm)";\n'
    nc, code = strip_cpp(src)
    assert nc.count("\n") == code.count("\n") == src.count("\n")
    assert "matmul" not in code and "relu" not in code and "torch::mm" not in code and "bmm" not in code
    assert 'torch::mm(' in nc


@pytest.mark.parametrize(
    "snippet, rule",
    [
        ("auto y = at::matmul(a, b);", "torch-compute"),
        ("auto y = torch::conv2d(a, b);", "torch-compute"),
        ("auto y = a.relu();", "torch-compute"),
        ("auto y = at::native::add(a, b);", "torch-compute"),
        ("cublasSaxpy(h, n, &one, x, 1, y, 1);", "library-compute"),
        ("cudnnSoftmaxForward(h, a, b, c, d, e, f, g);", "library-compute"),
        ("cudaStream_t s; cudaStreamCreate(&s);", "stream"),
        ("auto s = at::cuda::getStreamFromPool();", "stream"),
        ("cudaGraphLaunch(g, 0);", "stream"),
        ("cudaLaunchHostFunc(0, fn, nullptr);", "stream"),
        ("cuStreamWaitValue32(s, addr, 0, CU_STREAM_WAIT_VALUE_NOR);", "stream"),
        ("cuStreamWriteValue32(s, addr, 1, 0);", "stream"),
        ("cudaGetDriverEntryPoint(\"cuCtxSetLimit\", &fn, 0, &q);", "stream"),
        ("cuGetProcAddress(\"cuStreamWaitValue32\", &fn, 12000, 0, &q);", "stream"),
        ("cudaDeviceEnablePeerAccess(1, 0);", "stream"),
        ("cudaMemcpyPeerAsync(d, 1, s, 0, n, st);", "stream"),
        ("cuMemSetAccess(ptr, size, &desc, 1);", "stream"),
        ("cudaIpcOpenMemHandle(&p, h, 0);", "stream"),
        ("c10::cuda::DriverAPI::get()->cuMemSetAccess_(p, n, &d, 1);", "stream"),
        ("cuMemImportFromShareableHandle_v2(&h, fd, t);", "stream"),
        ("cudaMemcpy3DPeerAsync(&p, s);", "stream"),
        ("cuGreenCtxStreamCreate(&s, g, 0, 0);", "stream"),
        ("cudaGetExportTable(&t, &id);", "stream"),
        ("cudaGetDriverEntryPoint(NAME, &fn, 0, &q);", "stream"),
        ("std::thread t(fn); t.detach();", "thread"),
        ("auto f = std::async(fn);", "thread"),
        ("pthread_create(&t, nullptr, fn, nullptr);", "thread"),
        ("system(\"ls\");", "process"),
        ("void* h = dlopen(\"libx.so\", 0);", "native-python"),
        ("FILE* f = fopen(\"x\", \"r\");", "io"),
        ("const char* v = getenv(\"X\");", "io"),
        ("static float* last = nullptr;", "memoisation"),
        ("static std::unordered_map<void*, int> cache;", "memoisation"),
        ("__half h = __float2half(v);", "precision"),
        ("cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);", "precision"),
        ("asm(\"nop\");", "introspection"),
        ("auto c = x.cpu();", "host-compute"),
    ],
)
def test_cpp_rule(snippet: str, rule: str) -> None:
    assert rule in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n")


def test_cpp_file_level_rules(tmp_path: Path) -> None:
    assert "include" in cpp_rules('#include "../../etc/passwd.h"\n')
    assert "include" in cpp_rules('#include "/work/main/model.py"\n')
    assert "precision" in cpp_rules("#pragma GCC optimize(\"fast-math\")\n")
    assert "thread" in cpp_rules("#pragma omp parallel for\nvoid f() {}\n", flavour="cuda")
    assert cpp_rules("#pragma omp parallel for simd\nvoid f() {}\n", flavour="cpu", device=False) == set()
    assert "library-compute" in cpp_rules("void f() { cublasSgemm(h, a, b); }\n", flavour="cpu", device=False)
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    (ws / "binding_registry.h").write_text("#pragma once\n")
    (ws / "model.py").write_text("x = 1\n")
    (ws / "model_new.py").write_text("import cuda_extension\n")
    (ws / "kernels" / "a.cu").write_text('#include "../binding_registry.h"\n#include "../model.py"\n')
    found = check_submission(ws)
    assert [(v.rule, v.line) for v in found] == [("include", 2)]


def test_tma_descriptor_encoders_may_be_resolved_by_name() -> None:
    """Hopper TMA kernels resolve cuTensorMapEncodeTiled through the runtime (no libcuda is linked): a string
    literal naming a TMA encoder is allowed; any other name, or a name that is not a literal, is not."""
    ok = ('void f() { void* fn; cudaDriverEntryPointQueryResult q; '
          'cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, 0, &q); }')
    assert "stream" not in cpp_rules(ok)
    assert "stream" in cpp_rules(ok.replace("cuTensorMapEncodeTiled", "cuCtxSetLimit"))
    assert "stream" in cpp_rules(ok.replace("cudaGetDriverEntryPoint", "cuGetProcAddress"
                                            ).replace("cuTensorMapEncodeTiled", "cuStreamWaitValue32"))


def test_cpp_allowed_patterns() -> None:
    code = """
    #include <torch/extension.h>
    #include <ATen/cuda/CUDAContext.h>
    #include <cublas_v2.h>
    #include <cudnn.h>
    #include <cuda_fp16.h>
    __device__ __forceinline__ float ld(const float* p) {
        float v;
        asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
        return v;
    }
    __global__ void k(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = fmaxf(ld(x + i), 0.f) + __expf(x[i]) + std::numeric_limits<float>::max();
    }
    static cublasHandle_t handle_cache;
    torch::Tensor run(torch::Tensor a, torch::Tensor b) {
        TORCH_CHECK(a.is_cuda() && a.is_contiguous(), "bad input");
        auto c = torch::empty({a.size(0), b.size(1)}, a.options().dtype(torch::kFloat32));
        auto v = c.view({-1}).narrow(0, 0, 4).transpose(0, 0);
        cublasSgemm(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, nullptr,
                    nullptr, 1, nullptr, 1, nullptr, nullptr, 1);
        cudnnConvolutionForward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                CUDNN_CONVOLUTION_FWD_ALGO_GEMM, nullptr, 0, nullptr, nullptr, nullptr);
        k<<<1, 1, 0, at::cuda::getCurrentCUDAStream()>>>(a.data_ptr<float>(), c.data_ptr<float>(), a.numel());
        return c;
    }
    """
    assert cpp_rules(code) == set()




# -- the lexer ---------------------------------------------------------------------------------

def test_lexer_reads_literals_and_splices_as_the_compiler_does() -> None:
    src = textwrap.dedent('''\
        auto a = u8R"tag(PyRun_SimpleString(")" )tag";
        auto b = LR"(system("x"))";
        char q = '\\''; int n = 1'000'000; auto c = L"fork()\\"popen(";
        Py\\
        Run_SimpleString(nullptr); // a comment \\
        system("hidden by the splice: part of the comment");
        int last;
        ''')
    nc, code = strip_cpp(src)
    assert nc.count("\n") == code.count("\n") == src.count("\n")
    lines = code.splitlines()
    assert "PyRun" not in lines[0] and "system" not in lines[1] and "fork" not in lines[2] and "popen" not in lines[2]
    assert lines[3].startswith("PyRun_SimpleString(nullptr);")  # the splice joined the name
    assert "system" not in code and lines[6] == "int last;"  # same line number as in the source
    assert "1'000'000" in code  # digit separators are not character literals


def test_code_in_string_literals_does_not_count_but_spliced_names_do() -> None:
    assert cpp_rules('const char* s = R"(PyRun_SimpleString("x"); system("y");)";\n') == set()
    assert cpp_rules("void f() {\n    Py\\\nRun_SimpleString(\"import os\");\n}\n") == {"native-python"}
    assert cpp_rules("void f() {\n    // ok \\\n    system(\"ls\");\n}\n") == set()


# -- routes from native code into Python -------------------------------------------------------

@pytest.mark.parametrize(
    "snippet",
    [
        'PySys_GetObject("modules");',
        'PyRun_SimpleString("import torch");',
        'PyObject* m = PyImport_ImportModule("torch");',
        "Py_INCREF(obj);",
        "PyGILState_STATE s = PyGILState_Ensure();",
        'auto t = pybind11::module_::import("torch");',
        'auto t = py::module_::import("time");',
        'py::exec("import time");',
        'auto r = pybind11::eval("1");',
        "auto g = py::globals();",
        "pybind11::object o = pybind11::none();",
        'auto f = py::cast(x).attr("relu");',
        "PyObject* raw = nullptr;",
        'void* s = dlsym(RTLD_DEFAULT, "PyRun_SimpleString");',
        "auto v = THPVariable_Wrap(x);",
    ],
)
def test_native_python_routes(snippet: str) -> None:
    assert "native-python" in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n", flavour="cpu", device=False)


def test_pybind11_aliases_and_using_declarations_are_native_python() -> None:
    alias = 'namespace P = pybind11;\nvoid f() { P::module_::import("torch"); }\n'
    assert {(v.rule, v.line) for v in check_cpp(alias, "k.cpp", RuleConfig(flavour="cpu"), device_code=False)} >= {
        ("native-python", 1)}
    assert "native-python" in cpp_rules("using namespace pybind11;\nvoid f() { eval(\"1\"); }\n", device=False)
    assert "native-python" in cpp_rules("#include <Python.h>\n", device=False)
    assert "native-python" in cpp_rules("#include <pybind11/embed.h>\n", device=False)
    assert "native-python" in cpp_rules("#define N(a) Py ## a\nvoid f() { N(Run_SimpleString)(\"x\"); }\n")


def test_a_binding_may_define_functions_with_pybind11() -> None:
    binding = """
    #include <torch/extension.h>
    #include "../binding_registry.h"
    torch::Tensor f(torch::Tensor x, double s) { return torch::empty_like(x); }
    static void bind(pybind11::module_& m) {
        pybind11::gil_scoped_release nogil;
        m.def("f", &f, "doc", pybind11::arg("x"), pybind11::arg("s") = 1.0);
    }
    REGISTER_BINDING(f, bind);
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f, py::arg("x"), py::arg("s")); }
    """
    assert cpp_rules(binding, flavour="cpu", device=False) == set()


# -- persisting L2 and processes ---------------------------------------------------------------

@pytest.mark.parametrize(
    "snippet",
    [
        "cudaStreamAttrValue attr = {};",
        "attr.accessPolicyWindow.num_bytes = n;",
        "cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &attr);",
        "cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n);",
        "cudaCtxResetPersistingL2Cache();",
        "p.hitProp = cudaAccessPropertyPersisting;",
        "cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v);",
        "cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, n);",
    ],
)
def test_persisting_l2_apis(snippet: str) -> None:
    assert "l2-persist" in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n")


def test_ptx_cache_policies_are_persisting_l2() -> None:
    code = """
    __device__ float ld(const float* p) {
        float v; unsigned long long pol;
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
        asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(pol));
        return v;
    }
    """
    assert cpp_rules(code) == {"l2-persist"}


@pytest.mark.parametrize("snippet", ["pid_t p = fork();", "vfork();", "posix_spawn(&p, a, 0, 0, v, e);",
                                     "FILE* f = popen(\"ls\", \"r\");", "std::system(\"ls\");",
                                     "clone(fn, stack, 0, nullptr);", "execvp(a, v);"])
def test_processes_from_native_code(snippet: str) -> None:
    assert "process" in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n", flavour="cpu", device=False)


def test_members_named_like_process_calls_are_fine() -> None:
    assert cpp_rules("void f(Thing& t) {\n    t.system(1); t->clone(); t.signal(2); t->alarm(3);\n}\n", device=False) == set()


@pytest.mark.parametrize("snippet, rule", [
    ("::fork();", "process"), ("q::kill(1, 9);", "process"),  # namespace q { using ::kill; }
    ("struct sigaction sa{}; sigaction(14, &sa, nullptr);", "thread"), ("::signal(14, h);", "thread"),
    ("std::signal(14, h);", "thread"), ("std::raise(14);", "thread"), ("::alarm(1);", "thread"),
    ("q::alarm(1);", "thread"), ("bsd_signal(14, h);", "thread"), ("::setitimer(ITIMER_REAL, &t, nullptr);", "thread"),
    ("timer_create(CLOCK_MONOTONIC, &sev, &id);", "thread"), ("timer_settime(id, 0, &its, nullptr);", "thread"),
])
def test_signals_timers_and_processes_are_refused_however_qualified(snippet: str, rule: str) -> None:
    """A C library function is the same function as ``::name``, ``std::name`` or ``q::name`` after ``using ::name``
    (red team 2: a SIGALRM handler on the main thread ran between calls, unseen by the runtime checks)."""
    assert rule in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n", flavour="cpu", device=False)


def test_signal_headers_are_refused() -> None:
    assert cpp_rules("#include <signal.h>\n#include <sys/timerfd.h>\n", flavour="cpu", device=False) == {"thread"}


def test_include_through_a_macro_is_refused() -> None:
    assert "include" in cpp_rules('#define H "evil.tcc"\n#include H\n')


# -- red team B6: digraphs, token pasting, _Pragma ---------------------------------------------

B6_BYPASSES = [
    # (source, rule): each passed the checker with no violation before the B6 fixes
    ("%:include <Python.h>\n", "native-python"),
    ("%:include <thread>\n", "thread"),
    ('%:include "/dev/zero"\n', "include"),  # hung the compiler up to the build's limit
    ('%:  pragma GCC optimize("fast-math")\n', "precision"),
    ('%:define JOIN(a, b) a %:%: b\nvoid f() { JOIN(Py, Run_SimpleString)("x"); }\n', "native-python"),
    ('#define JOIN(a, b) a ## b\nvoid f() { JOIN(Py, Run_SimpleString)("x"); }\n', "native-python"),
    ('#define J(x) P ## x\nvoid f() { J(yRun_SimpleString)("x"); }\n', "native-python"),
    ("#define RUN P ## yRun_SimpleString\nvoid f() { RUN(\"x\"); }\n", "native-python"),
    ("#define M(a, b) a##b\nvoid f(at::Tensor x) { auto y = x.M(re, lu)(); }\n", "native-python"),
    ("int x;\r#define J(a, b) a ## b\rvoid f() { J(Py, Run_SimpleString)(\"x\"); }\n", "native-python"),
    ("\f#\vdefine J(a, b) a ## b\n", "native-python"),
    ("void f() { Py\\  \nRun_SimpleString(\"x\"); }\n", "native-python"),  # blanks after the backslash
    ('_Pragma("GCC optimize(\\"fast-math\\")")\nvoid f() {}\n', "precision"),
    ('#define FAST _Pragma("GCC optimize(\\"Ofast\\")")\nFAST\n', "precision"),
    ('#define P(x) _Pragma(#x)\nP(GCC optimize("fast-math"))\n', "include"),
    ('_Pragma("GCC push_options")\n', "include"),
    ('_Pragma("omp parallel for")\nvoid f() {}\n', "thread"),
]


@pytest.mark.parametrize("source, rule", B6_BYPASSES, ids=[f"b6-{i}" for i in range(len(B6_BYPASSES))])
def test_digraphs_pasting_and_pragma_operators_are_read_as_the_compiler_reads_them(source: str, rule: str) -> None:
    assert rule in cpp_rules(source, flavour="cuda", device=False)


@pytest.mark.parametrize(
    "snippet",
    [
        "c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKeySet(c10::DispatchKey::Python));",
        "c10::impl::IncludeDispatchKeyGuard g(k);",
        "c10::impl::ExcludeDispatchKeySetGuard g(ks);",
        "at::AutoDispatchBelowADInplaceOrView g;",
        "at::AutoDispatchBelowAutograd g;",
        "auto s = c10::impl::TorchDispatchModeTLS::pop_stack();",
        "c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, true);",
        "namespace ci = c10::impl;",
    ],
)
def test_dispatch_key_guards_that_hide_ops_from_the_audit(snippet: str) -> None:
    """B4 ran at::mul under ExcludeDispatchKeyGuard(Python): the TorchDispatchMode audit never saw it."""
    assert "checker-patch" in cpp_rules(f"void host_fn() {{\n    {snippet}\n}}\n", flavour="cpu", device=False)


def test_dispatcher_calls_are_torch_compute() -> None:
    assert "torch-compute" in cpp_rules('void f() {\n    auto op = c10::Dispatcher::singleton().findSchemaOrThrow('
                                        '"aten::mul", "Tensor");\n}\n', device=False)
    assert "torch-compute" in cpp_rules("void f(at::Tensor a) {\n    at::_ops::mul_Tensor::call(a, a);\n}\n",
                                        device=False)


def test_honest_preprocessor_use_stays_allowed() -> None:
    code = """
    #include <cstdio>
    #include <vector>
    #include <string>
    #define LOG(fmt, ...) std::printf(fmt, ##__VA_ARGS__)
    #define LOG2(fmt, args...) std::printf(fmt, ## args)
    #define STR(x) #x
    std::vector<::std::string> names;
    int table<:3:> = <%1, 2, 3%>;
    const char* s = "%:include <Python.h> _Pragma(\\"GCC optimize(\\\\\\"fast-math\\\\\\")\\") a ## b";
    // %:define J(a, b) a %:%: b
    __global__ void k(float* y) {
        _Pragma("unroll")
        for (int i = 0; i < 4; ++i) y[i] = 0.f;
    }
    void f() { LOG("%d", 1); LOG2("x"); }
    """
    assert cpp_rules(code) == set()


def test_the_compiler_reads_digraphs_and_not_trigraphs_with_the_build_standard(tmp_path: Path) -> None:
    """Ground truth for the lexer: g++ with the build's -std pastes through digraphs and ignores trigraphs."""
    import shutil
    import subprocess

    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "d.cpp"
    src.write_bytes(b"%:define JOIN(a, b) a %:%: b\nint JOIN(Py, Run) = 1;\n??=define TRI 1\n"
                    b"int x;\r\f#\vdefine CR 2\nint Py\\  \nSplice = CR;\n")
    out = subprocess.run([cxx, "-std=c++20", "-E", "-P", str(src)], capture_output=True, text=True).stdout
    assert "int PyRun = 1;" in out and "??=define TRI 1" in out and "int PySplice = 2;" in out, out
    nc, code = strip_cpp(src.read_bytes().decode())
    lines = nc.split("\n")  # not splitlines: it splits at \f and \v too
    assert lines[0] == "#define JOIN(a, b) a ## b" and lines[4] == "\f#\vdefine CR 2"
    assert lines[5].startswith("int PySplice = CR;") and code.count("\n") == 7  # a lone CR ends a line
