"""Facts about this host that the lean worker and the catalogue both need. Stdlib only,
and only modules Python has already loaded at start, so the worker stays cheap."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>: the signal a process gets when its parent dies


def cpu_model() -> str | None:
    """The CPU's model name as the kernel reports it (Linux), else None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def hostname() -> str:
    return os.uname().nodename


def python_version() -> str:
    import sys

    return ".".join(str(part) for part in sys.version_info[:3])


def die_with_parent_setter() -> Callable[[], None]:
    """A function that asks Linux to SIGKILL the calling process when its parent dies (a
    no-op elsewhere). Looked up now, so a child between fork and exec only calls it."""
    if not sys.platform.startswith("linux"):
        return lambda: None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
