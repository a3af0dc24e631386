"""The build cache: content-keyed objects and modules, the shared PCH and ``binding.o``, private work folders.

Everything here is written by the trusted process only, from files it copied itself (see
:func:`cuda_gym.build.files.snapshot`); nothing an agent's sandbox can write is read as a cache.
Layout under the cache root::

    <key>/cuda_extension.so          a linked module, by module key
    objects/<k[:2]>/<k>.o            a compiled translation unit, by object key
    objects/manifests/<m>.json       per unit and source content: the dependency sets seen, each with its object
    inline/<k>.json                  single files' recorded load_inline calls, by file content
    pch/<digest>/, infra/<digest>/   the precompiled torch header and binding.o, per toolchain
    tmp/<id>/ + tmp/<id>.lock        a build's work folder, alive while its lock is held
    locks/                           flock files
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cuda_gym.build.config import CACHE_ENV, BuildConfig
from cuda_gym.build.toolchain import Toolchain
from cuda_gym.errors import BuildError
from cuda_gym.paths import cache_dir
from cuda_gym.text import clean_output

logger = logging.getLogger(__name__)

STALE_AFTER_S = 60.0
"""A work folder whose lock nobody holds is removed once its lock file is this old (a builder
creates the lock file, then locks it: the grace period covers that instant)."""

MAX_MANIFEST_ENTRIES = 32
"""Dependency sets remembered per unit and source content (older ones are dropped)."""

EVICT_GRACE_S = 3600.0
"""Modules and objects used (stored or found) this recently are never evicted: a judge may hold a
module path between its build and the candidate's import, and a concurrent build may be about to link
an object it just found. The size bound can be exceeded by what the last hour stored."""

EVICT_EVERY_S = 60.0
"""Seconds between two eviction walks of one cache root in one process."""

EVICT_TO = 0.9
"""Eviction stops once the cache is below this fraction of its bound (not one file under it, so the
next few builds do not each walk and evict again)."""


def cache_root(config: BuildConfig | None = None) -> Path:
    """The artifact cache folder: ``config.cache_dir``, ``$CUDA_GYM_BUILD_CACHE``, else ``cache_dir()/build``."""
    if config is not None and config.cache_dir is not None:
        return Path(config.cache_dir).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return cache_dir() / "build"


def sha256_hex(data: bytes) -> str:
    """The sha256 of ``data`` as hex."""
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def file_locks(paths: list[Path]) -> Iterator[None]:
    """Exclusive locks on all ``paths``, taken in sorted order (no deadlock between builders)."""
    with contextlib.ExitStack() as stack:
        for path in sorted(set(paths)):
            stack.enter_context(file_lock(path))
        yield


def install(src: Path, dest: Path, mode: int = 0o644) -> None:
    """Put ``src`` at ``dest`` atomically: copied to a temporary name beside ``dest``, then ``os.replace``.

    A kill between the two leaves at most a ``.tmp-*`` file, which :func:`sweep` removes.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=dest.parent)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def touch(path: Path) -> None:
    """Mark a cached module or object as just used (its mtime: what :func:`evict` orders by)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def write_json_atomic(path: Path, data: object) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary name and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


# -- work folders and stale temporaries ----------------------------------------------------------


@contextlib.contextmanager
def work_dir(root: Path) -> Iterator[Path]:
    """A fresh private folder ``<root>/tmp/<id>`` for one build, removed on exit.

    Its lock ``<root>/tmp/<id>.lock`` is held for the folder's whole life, so that after a kill
    (the folder and any half-written precompiled header in it stay behind) the next build's
    :func:`sweep` sees the lock free and removes both.
    """
    tmp = root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="w", dir=tmp))
    os.chmod(folder, 0o700)
    lock = folder.with_name(folder.name + ".lock")
    with open(lock, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                lock.unlink()
            fcntl.flock(handle, fcntl.LOCK_UN)


_SWEPT_FILES: set[Path] = set()
_LAST_EVICTION: dict[Path, float] = {}


def sweep(root: Path, *, now: float | None = None, max_bytes: int | None = None) -> list[Path]:
    """Tidy the cache: remove what interrupted builds left (work folders nobody holds, ``.tmp-*`` files,
    old PCH temporaries) and, with ``max_bytes``, bound its size (:func:`evict`).

    Returns what was removed. Work folders are checked on every call (one listing of ``tmp/``); the
    stray ``.tmp-*`` files of killed installs once per process and cache root (that walk grows with
    the cache); the size at most every :data:`EVICT_EVERY_S` seconds per process and cache root.
    """
    now = time.time() if now is None else now
    removed: list[Path] = []
    if max_bytes is not None and now - _LAST_EVICTION.get(root, -math.inf) >= EVICT_EVERY_S:
        _LAST_EVICTION[root] = now
        removed += evict(root, max_bytes, now=now)
    tmp = root / "tmp"
    if tmp.is_dir():
        for lock in tmp.glob("*.lock"):
            folder = lock.with_suffix("")
            try:
                if now - lock.stat().st_mtime < STALE_AFTER_S:
                    continue
                with open(lock, "a+") as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(folder, ignore_errors=True)
                    lock.unlink()
                    removed.append(folder)
            except (BlockingIOError, OSError):
                continue
        for folder in tmp.iterdir():  # a folder whose lock file vanished (killed between the two)
            if folder.is_dir() and not folder.with_name(folder.name + ".lock").exists() and \
                    now - folder.stat().st_mtime >= STALE_AFTER_S:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    patterns = ["pch/*/.pch.*", "infra/*/.binding.*", "pch/*/.tmp-*"]  # one folder per toolchain: cheap
    if root not in _SWEPT_FILES:
        patterns += ["*/.tmp-*", "*/*/.tmp-*"]
        _SWEPT_FILES.add(root)
    for pattern in patterns:
        for path in root.glob(pattern):
            with contextlib.suppress(OSError):
                if now - path.stat().st_mtime >= STALE_AFTER_S:
                    path.unlink()
                    removed.append(path)
    if removed:
        logger.info("removed %d stale build temporaries under %s", len(removed), root)
    return removed


def _cache_files(root: Path) -> tuple[list[tuple[float, int, Path]], int]:
    """``(evictable, kept_bytes)``: modules and objects as (mtime, size, path), and the bytes of the
    precompiled headers and ``binding.o`` (counted against the bound, never evicted: every build needs them)."""
    evictable: list[tuple[float, int, Path]] = []
    for pattern in ("*/" + "cuda_extension.so", "objects/*/*.o"):
        for path in root.glob(pattern):
            with contextlib.suppress(OSError):
                st = path.lstat()
                evictable.append((st.st_mtime, st.st_size, path))
    kept = 0
    for pattern in ("pch/*/*", "infra/*/*"):
        for path in root.glob(pattern):
            with contextlib.suppress(OSError):
                kept += path.lstat().st_size
    return evictable, kept


def evict(root: Path, max_bytes: int, *, now: float | None = None, grace_s: float = EVICT_GRACE_S) -> list[Path]:
    """Remove the least recently used modules and objects until the cache holds at most ``max_bytes``.

    Used means stored or found by a build (:func:`touch`); the order is by mtime, oldest first, down
    to :data:`EVICT_TO` of the bound. Nothing used in the last ``grace_s`` seconds is removed. A
    removed object is compiled again by the next build that needs it (its manifest entry then
    points at nothing, which :meth:`ObjectStore.lookup` reads as a miss); a removed module is linked
    again. Returns the removed files.
    """
    now = time.time() if now is None else now
    evictable, kept = _cache_files(root)
    total = kept + sum(size for _, size, _ in evictable)
    if total <= max_bytes:
        return []
    removed: list[Path] = []
    for mtime, size, path in sorted(evictable):
        if total <= max_bytes * EVICT_TO:
            break
        if now - mtime < grace_s:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
        if path.name == "cuda_extension.so":
            with contextlib.suppress(OSError):
                path.parent.rmdir()
    if removed:
        logger.info("build cache %s above %d bytes: evicted %d least recently used files", root, max_bytes,
                    len(removed))
    return removed


# -- trusted toolchain products: the precompiled header and binding.o ---------------------------


def _run_trusted(cmd: list[str], cwd: Path, what: str) -> None:
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if out.returncode != 0:
        raise BuildError(f"building {what} failed (the toolchain is broken, not the agent's code): "
                         f"{clean_output(out.stdout + out.stderr, 2000)}")


def template(name: str) -> Path:
    """A pristine infrastructure file (``binding.cpp``, ``binding_registry.h``) from the package templates."""
    from cuda_gym.workspace import template_dir

    return template_dir() / "common" / name


def ensure_pch(tc: Toolchain, root: Path) -> Path:
    """``torch/extension.h`` precompiled with the binding flags, shared by every build of this toolchain.

    Returns the header to pass to ``-include``; GCC picks up the ``.gch`` beside it when the flags
    match and silently parses the header otherwise. The ~800 MB ``.gch`` is written in a locked
    work folder first, so a kill mid-way leaves nothing that :func:`sweep` does not remove.
    """
    digest = sha256_hex((tc.binding_signature() + "\npch").encode())[:24]
    folder = root / "pch" / digest
    header = folder / "torch_extension.h"
    gch = folder / "torch_extension.h.gch"
    if gch.exists():
        return header
    with file_lock(root / "locks" / f"pch-{digest}.lock"):
        if gch.exists():
            return header
        folder.mkdir(parents=True, exist_ok=True)
        header.write_text("#include <torch/extension.h>\n")
        started = time.perf_counter()
        with work_dir(root) as work:
            tmp = work / "torch_extension.h.gch"
            _run_trusted([tc.cxx, *tc.binding_flags, "-x", "c++-header", str(header), "-o", str(tmp)], folder,
                         "the torch/extension.h precompiled header")
            os.replace(tmp, gch)
        logger.info("precompiled torch/extension.h in %.1f s (%s)", time.perf_counter() - started, gch)
    return header


def ensure_infra_object(tc: Toolchain, root: Path) -> Path:
    """``binding.cpp`` (the pristine template, never the workspace copy) compiled once per toolchain."""
    source = template("binding.cpp")
    registry = template("binding_registry.h")
    content = source.read_bytes() + b"\0" + registry.read_bytes()
    digest = hashlib.sha256(content + tc.binding_signature().encode()).hexdigest()[:24]
    obj = root / "infra" / digest / "binding.o"
    if obj.exists():
        return obj
    with file_lock(root / "locks" / f"infra-{digest}.lock"):
        if obj.exists():
            return obj
        obj.parent.mkdir(parents=True, exist_ok=True)
        with work_dir(root) as work:
            tmp = work / "binding.o"
            _run_trusted([tc.cxx, *tc.binding_flags, "-I", str(registry.parent), "-c", str(source), "-o", str(tmp)],
                         obj.parent, "binding.cpp")
            os.replace(tmp, obj)
    return obj


# -- the object cache ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    """One translation unit of a build, as the cache sees it.

    Attributes:
        rel: workspace-relative source path (``kernels/add.cu``).
        rule: ``cxx`` or ``nvcc`` (the ninja rule).
        compiler: the compiler's absolute path.
        flags: the fixed flags for this file.
        manifest_key: sha256 over the toolchain signature, rule, compiler, flags, path and the
            source's own content: everything but the headers it includes.
    """

    rel: str
    rule: str
    compiler: str
    flags: tuple[str, ...]
    manifest_key: str

    @property
    def object_name(self) -> str:
        """The object's path inside a build's output folder."""
        return f"obj/{self.rel}.o"


@dataclass(frozen=True)
class Hit:
    """A unit found in the object cache: the object and what it was compiled from."""

    object_key: str
    path: Path
    deps: Mapping[str, str]
    """Workspace-relative path -> sha256 of every workspace file the compiler read for it."""


class ObjectStore:
    """Compiled translation units keyed by the content of every workspace file the compiler read.

    A lookup takes the unit (its own content is in its manifest key) and the hashes of the current
    snapshot; a manifest lists the dependency sets seen for that unit, and an entry matches when
    every file it lists has the same content now and no file of the same name appeared elsewhere
    in the workspace (it could shadow one on the include path). Rebuild decisions never look at a
    timestamp.
    """

    def __init__(self, root: Path) -> None:
        self.root = root / "objects"

    def _manifest(self, unit: Unit) -> Path:
        return self.root / "manifests" / f"{unit.manifest_key}.json"

    def lock_path(self, unit: Unit) -> Path:
        """The lock builders of the same unit content share (the second waits, then hits)."""
        return self.root.parent / "locks" / f"unit-{unit.manifest_key}.lock"

    def lookup(self, unit: Unit, hashes: Mapping[str, str], names: Mapping[str, tuple[str, ...]]) -> Hit | None:
        """The cached object for ``unit`` given the snapshot's ``hashes`` and basename index ``names``."""
        path = self._manifest(unit)
        try:
            entries = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        for entry in reversed(entries if isinstance(entries, list) else []):
            deps, seen = entry.get("deps", {}), entry.get("names", {})
            if all(hashes.get(rel) == digest for rel, digest in deps.items()) and \
                    all(tuple(names.get(base, ())) == tuple(paths) for base, paths in seen.items()):
                obj = self._object(entry.get("object", ""))
                if obj.is_file():
                    touch(obj)
                    return Hit(entry["object"], obj, dict(deps))
        return None

    def record(self, unit: Unit, deps: Mapping[str, str], names: Mapping[str, tuple[str, ...]],
               built: Path) -> Hit:
        """Store the freshly compiled ``built`` object of ``unit`` with the files it was compiled from."""
        seen = {base: list(names.get(base, ())) for base in sorted({rel.rsplit("/", 1)[-1] for rel in deps})}
        blob = json.dumps({"unit": unit.manifest_key, "deps": dict(sorted(deps.items()))}, sort_keys=True)
        key = sha256_hex(blob.encode())
        obj = self._object(key)
        if not obj.is_file():
            install(built, obj)
        else:
            touch(obj)
        path = self._manifest(unit)
        try:
            entries = json.loads(path.read_text())
            entries = entries if isinstance(entries, list) else []
        except (OSError, ValueError):
            entries = []
        entry = {"deps": dict(sorted(deps.items())), "names": seen, "object": key}
        if entry not in entries:
            entries = [*entries, entry][-MAX_MANIFEST_ENTRIES:]
            write_json_atomic(path, entries)
        return Hit(key, obj, dict(deps))

    def _object(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.o"
