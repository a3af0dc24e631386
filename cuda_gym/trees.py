"""Removing folders that untrusted code wrote: any depth, links never followed, locked parts opened up.

An agent's command, a candidate server or a single file's import can leave anything in the folders it
may write (a workspace, a job folder, a sandbox's private ``/tmp``): a chain of folders thousands deep,
folders without read or write permission, links to the host. Python 3.11's ``shutil.rmtree`` recurses
once per level and raises ``RecursionError`` past about a thousand, even with ``ignore_errors=True``
(red team 3: a candidate's 1500-deep chain in its job folder made ``Judge.evaluate`` raise after its
verdict and left the folder on disk). coreutils' ``rm -rf`` walks any depth without following links;
what it cannot remove (a folder its owner made unreadable, for a non-root caller) is opened up with
``chmod -R u+rwx`` (which does not follow links either) and removed again.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger(__name__)

_RM = shutil.which("rm") or ""
_CHMOD = shutil.which("chmod") or ""


def _run(argv: list[str]) -> None:
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)


def remove_tree(path: str | os.PathLike[str]) -> bool:
    """Remove ``path`` and everything under it; ``True`` when nothing is left.

    Never raises and never follows a link (a link named ``path`` is removed, not its target). Without
    coreutils (no ``rm`` on ``PATH``) it falls back to ``shutil.rmtree``, which may leave a very deep
    tree behind.
    """
    target = Path(path)
    if not os.path.lexists(target):
        return True
    if not _RM:
        try:
            if target.is_symlink() or not target.is_dir():
                target.unlink()
            else:
                shutil.rmtree(target, ignore_errors=True)
        except (OSError, RecursionError):
            pass
    else:
        _run([_RM, "-rf", "--one-file-system", "--", str(target)])
        if os.path.lexists(target) and _CHMOD and not target.is_symlink():
            _run([_CHMOD, "-R", "u+rwx", "--", str(target)])  # what its owner locked, opened for its owner
            _run([_RM, "-rf", "--one-file-system", "--", str(target)])
    if os.path.lexists(target):
        log.warning("could not remove %s", target)
        return False
    return True
