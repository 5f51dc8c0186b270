"""Minimal wheels made on the spot, for the tests of resolvers and installers (uv, pip):
no network, nothing fetched."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
          tag: str = "py3-none-any", files: dict[str, str] | None = None,
          entry_points: str = "") -> Path:
    """A minimal wheel of `name` with its METADATA and RECORD, as an index serves it:
    `files` (path -> text), else an empty package of its name; `entry_points` as the
    distribution's entry_points.txt."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = dict(files or {f"{name.replace('-', '_')}/__init__.py": ""})
    files[f"{dist}.dist-info/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: "
                                           f"{version}\n"
                                           + "".join(f"Requires-Dist: {r}\n" for r in requires))
    files[f"{dist}.dist-info/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: "
                                        f"true\nTag: {tag}\n")
    if entry_points:
        files[f"{dist}.dist-info/entry_points.txt"] = entry_points

    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(
            b"=").decode()

    record = [f"{n},sha256={digest(t)},{len(t.encode())}" for n, t in files.items()]
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for n, text in files.items():
            archive.writestr(n, text)
        archive.writestr(f"{dist}.dist-info/RECORD", "\n".join([*record,
                                                                f"{dist}.dist-info/RECORD,,"]))
    return path
