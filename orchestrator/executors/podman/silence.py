"""A podman that stopped answering, remembered on this node for a while.

Podman has no daemon to ask whether it is alive: a hung podman (a stuck storage lock, a
dead conmon) shows only when a step runs out its bound. Each cell asks several steps, and
a sweep runs its cells in several processes (Ray workers, Slurm tasks), so without a memory
every cell would wait out the bound again, and a sweep of 100 cells would sit for hours.
The first step that gets no answer writes a note in this user's own folder on the node;
for SILENT_FOR_S every podman step of every process here fails at once with the note's
words instead of asking. A sweep's first question (its leftovers, asked by the driver)
always asks, and a podman that answers it clears the note.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path

SILENT_FOR_S = 600.0
NOTE = "podman-silent.json"


def _folder() -> Path | None:
    """This user's folder for the note, private to them; None where it cannot be (another
    user's folder of that name, a link): then nothing is remembered, as before."""
    folder = Path(tempfile.gettempdir()) / f"matrix-bench-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    try:
        found = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or \
            found.st_mode & 0o077:
        return None
    return folder


def remember(why: str) -> None:
    """Note, for every process on this node, that podman did not answer (`why`)."""
    folder = _folder()
    if folder is None:
        return
    try:  # a memory only: a full disk must not turn podman's silence into a traceback
        fd, partial = tempfile.mkstemp(dir=folder, prefix=".podman-silent-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"why": why, "at": time.time()}, out)
        os.replace(partial, folder / NOTE)
    except OSError:
        return


def why_silent() -> str | None:
    """Why podman is not to be asked now (a note younger than SILENT_FOR_S), or None."""
    folder = _folder()
    if folder is None:
        return None
    try:
        fd = os.open(folder / NOTE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd, encoding="utf-8") as note:
            found = json.load(note)
        why, at = str(found["why"]), float(found["at"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not 0 <= time.time() - at < SILENT_FOR_S:
        return None
    return (f"{why} at {time.strftime('%H:%M:%S', time.localtime(at))}; not asked again "
            f"on this node until {time.strftime('%H:%M:%S', time.localtime(at + SILENT_FOR_S))}"
            " (a new matrix run on this node asks at once)")


def forget() -> None:
    """Podman answered: its steps are asked again."""
    folder = _folder()
    if folder is not None:
        (folder / NOTE).unlink(missing_ok=True)
