"""Python checks of the static rules: one iterative pass over a submission's AST (``model_new.py`` or a single file)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from cuda_gym.judge.result import Violation
from cuda_gym.judge.rules.cpp_checks import check_cpp
from cuda_gym.judge.rules.policy import (
    COMPUTE_METHODS,
    ENV_KEYS_ALLOWED,
    FAST_MATH_FLAGS,
    INTROSPECTION_ATTRS,
    INTROSPECTION_BUILTINS,
    INTROSPECTION_MODULES,
    IO_MODULES,
    LOW_PRECISION_DTYPES,
    OS_ALLOWED,
    OS_PROCESS,
    PROCESS_MODULES,
    STREAM_NAMES,
    SUBCLASS_NAMES,
    THREAD_MODULES,
    TIMER_MODULES,
    TORCH_ALLOWED_CALLS,
    TORCH_OPS_NAMESPACES,
    TORCH_RANDOM_INIT,
    RuleConfig,
)

logger = logging.getLogger(__name__)

_FUNCTION_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


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


class _PyChecker:
    """One pre-order pass over a Python module's AST, collecting violations.

    The walk keeps its own stack (:meth:`run`), so deeply nested expressions (a 500-term sum) cost
    no Python recursion; ``visit_<Node>`` methods check one node and never descend themselves.
    """

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
        self.computed: set[str] = set()
        """Names assigned (somewhere) a value that is not a string literal: not resolvable as sources."""
        self.cpp_sources: list[tuple[str, int, bool]] = []

    def run(self, tree: ast.AST) -> None:
        """Visit every node of ``tree`` parents first; function scopes are pushed on entry, popped after."""
        stack: list[tuple[ast.AST, bool]] = [(tree, False)]
        while stack:
            node, leaving = stack.pop()
            if leaving:
                self.func_stack.pop()
                continue
            method = getattr(self, f"visit_{type(node).__name__}", None)
            if method is not None:
                method(node)
            if isinstance(node, _FUNCTION_NODES):
                self.func_stack.append(getattr(node, "name", "<lambda>"))
                stack.append((node, True))
            stack.extend((child, False) for child in reversed(list(ast.iter_child_nodes(node))))

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
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                text = _string_value(node.value) if isinstance(node, ast.Assign) else None
                for name in (n for t in targets for n in _target_names(t)):
                    if text is not None:
                        self.strings.setdefault(name, []).append((text, node.value.lineno))
                    else:  # bound to something the checker cannot read as a string (too)
                        self.computed.add(name)
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
        elif top in PROCESS_MODULES or name in PROCESS_MODULES:
            self.add("process", node, f"Importing {name} starts processes; all work must run in forward.")
        elif top in THREAD_MODULES or name in THREAD_MODULES:
            self.add("thread", node, f"Importing {name} starts threads; all work must run in forward.")
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

    visit_AsyncFunctionDef = visit_FunctionDef

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

    def visit_Try(self, node: ast.Try) -> None:
        if self.in_function or not _is_import_guard(node):
            self.add("fallback", node, "try/except can fall back to other code when a kernel fails; let errors surface.")

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global) -> None:
        self.add("memoisation", node, f"global {', '.join(node.names)} keeps state across calls; compute every call.")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add("memoisation", node, f"nonlocal {', '.join(node.names)} keeps state across calls.")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult):
            self.add("torch-compute", node, "The @ operator is a PyTorch matmul; call your kernel instead.")

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

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.check_store(node.target, node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_store(node.target, node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self.check_store(t, node)

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
                self.add("process", node, f"{q}() starts or signals processes; not allowed.")
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
            self.add("process", node, f"{q} starts processes; not allowed.")
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
                self.add("torch-compute", node,
                         f"{q} is created at module level; layers may only hold parameters in __init__.")
            return
        import types

        import torch

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
        sources = [(kw.value, kw.arg == "cuda_sources") for kw in node.keywords if kw.arg in ("cpp_sources",
                                                                                         "cuda_sources")]
        if q.endswith("load_inline"):
            sources += [(arg, i == 1) for i, arg in enumerate(node.args[1:3])]
        for value, is_cuda in sources:
            found, unresolved = self.resolve_sources(value)
            self.cpp_sources += [(text, line, is_cuda) for text, line in found]
            for item in unresolved:
                self.add("unreadable", item, "load_inline sources the checker cannot read (a call such as "
                         ".replace(), a subscript, a name bound to a computed value or to nothing here): "
                         "pass string literals, names assigned string literals, or lists and + sums of them.")
        for kw in node.keywords:
            if kw.arg in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
                for text, _line in self.resolve_strings(kw.value):
                    if any(flag in text for flag in FAST_MATH_FLAGS) and self.config.precision == "fp32":
                        self.add("precision", kw.value, f"Compiler flag {text!r} enables fast math; not allowed.")
            elif kw.arg == "sources" and self.root is not None:
                for text, _ in self.resolve_strings(kw.value):
                    self.add("include", kw.value, f"load(sources=...) reads {text}; put sources in kernels/ or "
                             "use load_inline.")

    def resolve_strings(self, node: ast.AST) -> list[tuple[str, int]]:
        """The string values ``node`` may stand for (what :meth:`resolve_sources` can read of it)."""
        return self.resolve_sources(node)[0]

    def resolve_sources(self, node: ast.AST) -> tuple[list[tuple[str, int]], list[ast.AST]]:
        """``(strings, unresolved)``: the string values ``node`` may stand for, and its parts that stand for
        values the checker cannot read.

        Read: literals and f-strings (fields as `` 0 ``), names assigned only string literals, lists,
        tuples and ``+`` sums of them, and the text-only transforms honest files use on them
        (``textwrap.dedent``, ``inspect.cleandoc``, ``.strip()``/``.lstrip()``/``.rstrip()``,
        ``"sep".join([...])``, ``.format(...)``/``%`` with fields read as `` 0 ``). Anything else
        (``SRC.replace(...)``, ``open(...).read()``, a subscript, a parameter) is unresolved.
        """
        found: list[tuple[str, int]] = []
        unresolved: list[ast.AST] = []
        stack = [node]
        while stack:
            item = stack.pop()
            text = _string_value(item)
            if text is not None:
                found.append((text, getattr(item, "lineno", 1)))
            elif isinstance(item, (ast.List, ast.Tuple)):
                stack.extend(reversed(item.elts))
            elif isinstance(item, ast.Name):
                if item.id in self.computed or item.id not in self.strings:
                    unresolved.append(item)
                found.extend(self.strings.get(item.id, []))
            elif isinstance(item, ast.BinOp) and isinstance(item.op, (ast.Add, ast.Mod)):
                stack.extend((item.right, item.left) if isinstance(item.op, ast.Add) else (item.left,))
            elif isinstance(item, ast.Call) and self._text_transform(item) is not None:
                stack.append(self._text_transform(item))  # type: ignore[arg-type]
            else:
                unresolved.append(item)
        return found, unresolved

    def _text_transform(self, call: ast.Call) -> ast.AST | None:
        """The operand of a call that only reshapes text (see :meth:`resolve_sources`), else ``None``."""
        q = self.qualname(call.func) or ""
        if q in ("textwrap.dedent", "inspect.cleandoc") and len(call.args) == 1 and not call.keywords:
            return call.args[0]
        if not isinstance(call.func, ast.Attribute):
            return None
        literal_args = all(isinstance(a, ast.Constant) for a in [*call.args, *(k.value for k in call.keywords)])
        if call.func.attr in ("strip", "lstrip", "rstrip") and literal_args:
            return call.func.value
        if call.func.attr == "format" and not any(isinstance(a, ast.Starred) for a in call.args) and \
                all(k.arg is not None for k in call.keywords):
            return call.func.value
        if call.func.attr == "join" and len(call.args) == 1 and _string_value(call.func.value) is not None:
            return call.args[0]
        return None


def _string_value(node: ast.AST) -> str | None:
    """The value of a string literal, f-string (fields as `` 0 ``) or a ``+`` chain of them, else None."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            parts.append(item.value)
        elif isinstance(item, ast.JoinedStr):
            parts.append("".join(str(v.value) if isinstance(v, ast.Constant) else " 0 " for v in item.values))
        elif isinstance(item, ast.BinOp) and isinstance(item.op, ast.Add):
            stack.extend((item.right, item.left))
        else:
            return None
    return "".join(parts)


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
    """Check one Python source (``model_new.py`` or a single-file submission), with its inline C++.

    Never raises on agent input: a syntax error gives no violation (the candidate worker reports
    it as the agent's error); a source too deeply nested for the parser or the checker gives one
    ``unreadable`` violation.
    """
    config = config or RuleConfig()
    try:
        tree = ast.parse(text, filename=file)
    except SyntaxError as exc:
        logger.debug("syntax error in %s: %s", file, exc)
        return []  # the candidate worker reports the SyntaxError itself
    except (RecursionError, MemoryError, ValueError) as exc:
        return [_unreadable(file, f"Python cannot parse it ({type(exc).__name__})")]
    try:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                child._parent = parent  # type: ignore[attr-defined]
        checker = _PyChecker(file, config, root)
        checker.prepass(tree)
        checker.run(tree)
    except RecursionError:
        return [_unreadable(file, "it is nested too deeply for the checker")]
    found = checker.found
    seen: set[tuple[str, int]] = set()
    for source, line, is_cuda in checker.cpp_sources:
        if (source, line) in seen:
            continue
        seen.add((source, line))
        for v in check_cpp(source, file, config, root=None, device_code=is_cuda):
            found.append(Violation(v.rule, v.message + " (inline source)", file, line + (v.line or 1) - 1))
    return found


def _unreadable(file: str, why: str) -> Violation:
    return Violation("unreadable", f"{file} cannot be checked: {why}; split deep expressions into steps.", file, 1)
