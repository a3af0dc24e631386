"""The agent's per-episode directory: templates, protected infrastructure files and path confinement."""

from __future__ import annotations

import ast
import hashlib
import logging
import os
import stat
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cuda_gym.errors import ToolError
from cuda_gym.tasks.task import Task
from cuda_gym.trees import remove_tree
from cuda_gym.vocab import check_flavour

logger = logging.getLogger(__name__)

ROOT_NAME = "workspace"
BUILD_NAME = "build"
PROTECTED: tuple[str, ...] = ("SKILL.md", "model.py", "binding.cpp", "binding_registry.h")
"""Files the agent may read but not change; their hashes are checked by :meth:`Workspace.tampered`."""

SOURCE_SUFFIXES: tuple[str, ...] = (".cu", ".cpp")
"""Suffixes of the files under ``kernels/`` that are compiled into the extension."""


def template_dir() -> Path:
    """The folder holding ``common/``, ``cuda/`` and ``cpu/`` templates (package data)."""
    return Path(str(resources.files("cuda_gym") / "templates"))


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
"""``os.open`` flags for reading a file the agent may have replaced: no link followed, a FIFO never blocks."""

_MAX_PROTECTED_BYTES = 64 * 1024 * 1024
"""Past this size a protected file is tampered with (the pristine ones are kilobytes)."""


def _is_regular(path: Path) -> bool:
    """Whether ``path`` itself (not a link's target) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _read_regular(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of the regular file ``path`` (no link followed, never blocking), or ``None``."""
    try:
        fd = os.open(path, NOFOLLOW_READ)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(max_bytes + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _init_params(code: str) -> str:
    """The parameter list of ``Model.__init__`` after ``self`` (with a leading ``, ``), or ``""``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return ", *args, **kwargs"
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    args = item.args
                    if args.posonlyargs:
                        args.posonlyargs = args.posonlyargs[1:]
                    elif args.args:
                        args.args = args.args[1:]
                    text = ast.unparse(args)
                    return f", {text}" if text else ""
            return ""
    return ", *args, **kwargs"


def pristine_files(task: Task, flavour: str) -> dict[str, bytes]:
    """The content of every protected file for ``task`` and ``flavour``, as :meth:`Workspace.create` writes it."""
    check_flavour(flavour, "workspace flavour")
    tdir = template_dir()
    return {
        "SKILL.md": (tdir / flavour / "SKILL.md").read_bytes(),
        "model.py": task.code.encode(),
        "binding.cpp": (tdir / "common" / "binding.cpp").read_bytes(),
        "binding_registry.h": (tdir / "common" / "binding_registry.h").read_bytes(),
    }


def model_new_stub(task: Task) -> str:
    """A starting ``model_new.py``: a ``ModelNew`` with ``Model``'s constructor whose forward raises."""
    template = (template_dir() / "common" / "model_new.py.tmpl").read_text()
    return template.replace("{params}", _init_params(task.code))


@dataclass
class Workspace:
    """One episode's directory: ``workspace/`` (the agent's root) and ``build/`` (outside the root).

    Attributes:
        episode_dir: the folder holding ``root`` and ``build_dir``; removed by :meth:`close`.
        root: the agent's root (``SKILL.md``, ``model.py``, ``model_new.py``, ``kernels/``,
            ``binding.cpp``, ``binding_registry.h``); every agent path is relative to it.
        build_dir: ninja's build folder, outside the root so the agent cannot reach objects.
        task: the task of the episode.
        flavour: ``"cuda"`` (CUDA kernels) or ``"cpu"`` (C++/OpenMP kernels).
        infra_hashes: sha256 of each protected file as it must be (kept in memory, not on disk).
        owned: whether :meth:`close` may delete ``episode_dir`` (False for adopted directories, where
            only a temporary ``build_dir`` of our own is removed).
    """

    episode_dir: Path
    root: Path
    build_dir: Path
    task: Task
    flavour: str
    infra_hashes: dict[str, str]
    owned: bool = True
    temp_dir: Path | None = None
    """A temporary folder of ours to remove on close even when the root is adopted."""

    @property
    def protected(self) -> tuple[str, ...]:
        """Relative paths of the read-only infrastructure files."""
        return PROTECTED

    @classmethod
    def create(cls, task: Task, *, flavour: str = "cuda", parent: str | os.PathLike[str] | None = None) -> Workspace:
        """Make a fresh episode directory for ``task`` under ``parent`` (default: the system temp folder)."""
        files = pristine_files(task, flavour)
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        episode = Path(tempfile.mkdtemp(prefix="cuda_gym_ep_", dir=parent)).resolve()
        root = episode / ROOT_NAME
        build = episode / BUILD_NAME
        (root / "kernels").mkdir(parents=True)
        build.mkdir()
        for rel, data in files.items():
            path = root / rel
            path.write_bytes(data)
            path.chmod(0o444)
        (root / "model_new.py").write_text(model_new_stub(task))
        if flavour == "cpu":
            (root / "kernels" / "README.md").write_bytes((template_dir() / "cpu" / "kernels_README.md").read_bytes())
        hashes = {rel: _sha256(data) for rel, data in files.items()}
        logger.debug("created workspace %s for %s (%s)", root, task.id, flavour)
        return cls(episode, root, build, task, flavour, hashes, owned=True)

    @classmethod
    def open(cls, path: str | os.PathLike[str], task: Task, flavour: str = "cuda",
             build_dir: str | os.PathLike[str] | None = None) -> Workspace:
        """Adopt an existing agent root (``cuda-gym judge --workspace DIR``); nothing is written into it.

        Protected files are compared with the pristine templates and ``task.code``; ``build_dir``
        defaults to a fresh temporary folder (removed by :meth:`close`; the root never is).
        """
        root = Path(path).resolve()
        if not root.is_dir():
            raise ToolError(f"workspace {root} is not a directory: pass the folder holding model_new.py and kernels/")
        hashes = {rel: _sha256(data) for rel, data in pristine_files(task, flavour).items()}
        if build_dir is None:
            episode = Path(tempfile.mkdtemp(prefix="cuda_gym_build_")).resolve()
            build = episode / BUILD_NAME
            build.mkdir()
            return cls(episode, root, build, task, flavour, hashes, owned=False, temp_dir=episode)
        build = Path(build_dir).resolve()
        build.mkdir(parents=True, exist_ok=True)
        return cls(root.parent, root, build, task, flavour, hashes, owned=False)

    def resolve(self, rel: str | os.PathLike[str]) -> Path:
        """The absolute path of ``rel`` inside the root; raises ``ToolError`` for any path that escapes it.

        Absolute paths are accepted only inside the root; ``..`` and symbolic links are resolved
        (without touching the file: a link loop, a FIFO or a device never raises or blocks here) and
        the result must still lie inside the root. What the result is, the caller checks when it opens it.
        """
        text = os.fspath(rel)
        if not text or "\x00" in text:
            raise ToolError("empty or invalid path: give a path relative to the workspace, such as kernels/add.cu")
        try:
            os.fsencode(text)
        except UnicodeEncodeError:
            raise ToolError(f"path {text[:80]!r} holds a lone surrogate: give a valid Unicode path") from None
        p = Path(text)
        candidate = p if p.is_absolute() else self.root / p
        # os.path.realpath, not Path.resolve: the latter raises RuntimeError/OSError on link loops.
        resolved = Path(os.path.realpath(candidate))
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise ToolError(f"path {text[:200]!r} is outside the workspace: use a path relative to the workspace "
                            "root, such as kernels/add.cu")
        return resolved

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` relative to the root, as a POSIX string (after :meth:`resolve`)."""
        return self.resolve(path).relative_to(self.root).as_posix()

    def is_protected(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` (relative or absolute, inside the root) is a protected infrastructure file."""
        try:
            rel = self.relative(path)
        except ToolError:
            return False
        return rel in PROTECTED

    def tampered(self) -> list[str]:
        """Protected files whose content differs from the pristine version or that are missing/not regular files.

        Each is opened without following a link and without blocking, so an agent's FIFO or link in
        its place is reported, never read.
        """
        bad = []
        for rel, digest in self.infra_hashes.items():
            data = _read_regular(self.root / rel, _MAX_PROTECTED_BYTES)
            if data is None or _sha256(data) != digest:
                bad.append(rel)
        return bad

    def sources(self) -> list[Path]:
        """The files the build compiles: ``kernels/*.cu`` and ``kernels/*.cpp`` (bindings included), sorted."""
        kernels = self.root / "kernels"
        if not kernels.is_dir():
            return []
        return sorted(p for p in kernels.iterdir()
                      if p.suffix in SOURCE_SUFFIXES and _is_regular(p) and not p.name.startswith("."))

    def close(self, keep: bool = False) -> None:
        """Remove the episode directory (unless ``keep``); an adopted root is never removed."""
        if keep:
            return
        target = self.episode_dir if self.owned else self.temp_dir
        if target is None or not target.exists():
            return

        remove_tree(target)
