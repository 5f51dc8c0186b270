"""Minimal wheels made on the spot, for the tests of resolvers and installers (uv, pip):
no network, nothing fetched."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (),
          tag: str = "py3-none-any") -> Path:
    """A minimal wheel of `name` with its METADATA and RECORD, as an index serves it."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{name.replace('-', '_')}/__init__.py": "",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                      + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: "
                                   f"true\nTag: {tag}\n",
    }
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
