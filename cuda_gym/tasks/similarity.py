"""Normalized-AST similarity of task programs, for decontamination against a reference set.

Two task files are compared through what is left of their syntax trees once everything that a
copy can change for free is taken out:

* docstrings (a string constant as a statement), comments and formatting are gone (``ast.parse``);
* ``import`` statements are dropped, and a name bound by an import is replaced by the module path
  it stands for (``F`` and ``nn.functional`` both become ``torch.nn.functional``), so aliases
  do not matter;
* every other identifier (variables, arguments, functions, classes, attributes of ``self``) is
  renamed ``v0, v1, ...`` in order of first appearance; attribute names on anything else are
  kept, because they name the operators (``torch.softmax``, ``nn.Conv2d``, ``x.transpose``);
* every number becomes ``NUM`` and every string ``STR``; ``True``, ``False`` and ``None`` are kept;
* ``super(Model, self)`` becomes ``super()``.

The normalized tree is written out as its pre-order sequence of node tokens (node type plus the
normalized name or constant), and a file's features are the multiset of its token 4-grams.
The similarity of two files is the Dice coefficient of their feature multisets,
``2 |A & B| / (|A| + |B|)``: 1.0 for files that differ only in names, constants, comments,
docstrings or import aliases; the CUDA Agent paper's decontamination threshold is 0.9.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NGRAM = 4
"""Length of the token n-grams that are a file's features."""

DEFAULT_THRESHOLD = 0.9
"""Tasks at least this similar to a reference task count as near-copies (the paper's value)."""


class _Normalizer(ast.NodeTransformer):
    """Applies the normalizations of the module docstring to one module's tree."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.names: dict[str, str] = {}
        self.paths: set[str] = set()
        """Names made here that stand for a module path (``torch.nn``), not a variable."""

    def _rename(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Module(self, node: ast.Module) -> ast.AST:
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    self.modules[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
            elif isinstance(stmt, ast.ImportFrom) and stmt.module:
                for alias in stmt.names:
                    self.modules[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
        node.body = self._drop_docstring([s for s in node.body if not isinstance(s, (ast.Import, ast.ImportFrom))])
        return self.generic_visit(node)

    def _drop_docstring(self, body: list[ast.stmt]) -> list[ast.stmt]:
        kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                        and isinstance(s.value.value, str))]
        return kept or [ast.Pass()]

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._rename(node.name)
        node.body = self._drop_docstring(node.body)
        node.returns = None
        node.decorator_list = []
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._rename(node.name)
        node.body = self._drop_docstring(node.body)
        return self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        return None

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        return None

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._rename(node.arg)
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        value = node.value if node.value is not None else ast.Constant(None)
        return self.visit(ast.Assign(targets=[node.target], value=value, lineno=node.lineno))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.modules:
            self.paths.add(self.modules[node.id])
            return ast.Name(id=self.modules[node.id], ctx=ast.Load())
        node.id = self._rename(node.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        new = self.generic_visit(node)
        assert isinstance(new, ast.Attribute)
        if isinstance(new.value, ast.Name) and new.value.id in self.paths:
            path = f"{new.value.id}.{new.attr}"  # torch.nn.functional.relu, however it was spelled
            self.paths.add(path)
            return ast.Name(id=path, ctx=ast.Load())
        if on_self:
            new.attr = self._rename(new.attr)
        return new

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, bool) or node.value is None or node.value is Ellipsis:
            return node
        return ast.Constant("STR" if isinstance(node.value, (str, bytes)) else "NUM")

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id == "super":
            node.args = []
        return self.generic_visit(node)


def _label(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant):
        return repr(node.value)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg or "**"
    return ""


def _tokens(node: ast.AST) -> Iterable[str]:
    if isinstance(node, (ast.expr_context, ast.Load, ast.Store, ast.Del)):
        return
    label = _label(node)
    yield f"{type(node).__name__}:{label}" if label else type(node).__name__
    for child in ast.iter_child_nodes(node):
        yield from _tokens(child)


def normalized_tokens(code: str) -> list[str]:
    """The pre-order token sequence of ``code``'s normalized tree (see the module docstring).

    Raises ``SyntaxError`` for code that does not parse.
    """
    tree = _Normalizer().visit(ast.parse(code))
    return list(_tokens(tree))[1:]  # without the Module node itself


@dataclass(frozen=True)
class Fingerprint:
    """A program's features: its token n-grams, repeats numbered so a set holds the multiset."""

    features: frozenset[tuple[str, int]]

    @classmethod
    def of(cls, code: str) -> Fingerprint:
        """The fingerprint of ``code`` (an empty one for code that does not parse)."""
        try:
            tokens = normalized_tokens(code)
        except SyntaxError:
            return cls(frozenset())
        grams = [" ".join(tokens[i:i + NGRAM]) for i in range(max(1, len(tokens) - NGRAM + 1))]
        counts: dict[str, int] = {}
        features = set()
        for gram in grams:
            n = counts.get(gram, 0)
            counts[gram] = n + 1
            features.add((gram, n))
        return cls(frozenset(features))

    def __len__(self) -> int:
        return len(self.features)

    def similarity(self, other: Fingerprint) -> float:
        """Dice coefficient of the two feature multisets, in [0, 1]."""
        total = len(self.features) + len(other.features)
        if total == 0:
            return 0.0
        return 2 * len(self.features & other.features) / total


def similarity(code_a: str, code_b: str) -> float:
    """The normalized-AST similarity of two programs (1.0: the same program up to names and constants)."""
    return Fingerprint.of(code_a).similarity(Fingerprint.of(code_b))


@dataclass(frozen=True)
class Nearest:
    """The reference task most similar to a task."""

    task_id: str
    reference_id: str
    similarity: float


class ReferenceIndex:
    """Fingerprints of a reference task set, queried for the nearest neighbour of a program."""

    def __init__(self, items: Sequence[tuple[str, str]]) -> None:
        """``items``: (task id, code) of each reference task."""
        self.ids = [task_id for task_id, _ in items]
        self.prints = [Fingerprint.of(code) for _, code in items]

    @classmethod
    def of_tasks(cls, tasks: Iterable[object]) -> ReferenceIndex:
        """An index of ``Task`` objects (anything with ``id`` and ``code``)."""
        return cls([(t.id, t.code) for t in tasks])  # type: ignore[attr-defined]

    def __len__(self) -> int:
        return len(self.ids)

    def nearest(self, code: str, *, exclude: str | None = None) -> tuple[str, float]:
        """(reference id, similarity) of the most similar reference task; ``("", 0.0)`` when empty.

        ``exclude`` leaves out the reference task of that id (a task compared with its own set).
        """
        query = Fingerprint.of(code)
        size = len(query)
        best_id, best = "", 0.0
        for ref_id, ref in zip(self.ids, self.prints):
            if ref_id == exclude:
                continue
            total = size + len(ref)
            if total == 0 or 2 * min(size, len(ref)) / total <= best:
                continue  # even a full overlap could not beat the best so far
            score = query.similarity(ref)
            if score > best:
                best_id, best = ref_id, score
        return best_id, best
