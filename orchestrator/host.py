"""Facts about this host that the lean worker and the catalogue both need. Stdlib only,
and only modules Python has already loaded at start, so the worker stays cheap."""

from __future__ import annotations

import os


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
