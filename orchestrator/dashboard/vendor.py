"""The chart library the dashboard's pages draw with: Chart.js, taken from the npm registry
when the package is built (`hatch_build.py` calls `fetch`), checked against its pinned
integrity, and kept in the package (`orchestrator/dashboard/vendor/`, not in git), so a
dashboard is written, and opened, without any network.

Standard library only: the build hook imports this file before the package exists.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import urllib.request
from pathlib import Path

NAME = "chart.js"
VERSION = "4.5.1"
# the registry's `dist.integrity` of chart.js-4.5.1.tgz (npm view chart.js@4.5.1 dist.integrity)
INTEGRITY = ("sha512-GIjfiT9dbmHRiYi6Nl2yFCq7kkwdkp1W/lp2J99rX0yo9tgJGn3lKQATztIjb5tVtevcBtId"
             "ICNWqlq5+E8/Pw==")
MEMBER = "package/dist/chart.umd.min.js"
SCRIPT_SHA256 = "48444a82d4edcb5bec0f1965faacdde18d9c17db3063d042abada2f705c9f54a"  # MEMBER
VENDORED = Path(__file__).resolve().parent / "vendor" / "chart.umd.min.js"
DEFAULT_REGISTRY = "https://registry.npmjs.org"


class VendorError(RuntimeError):
    """The chart library could not be fetched or does not match its pin."""


def registry() -> str:
    """npm's own setting if the user has one (a mirror), else the public registry."""
    return (os.environ.get("npm_config_registry")  # noqa: SIM112 (npm sets it lower-case)
            or os.environ.get("NPM_CONFIG_REGISTRY")
            or DEFAULT_REGISTRY).rstrip("/")


def fetch(target: Path = VENDORED, timeout_s: float = 60) -> Path:
    """Put chart.umd.min.js at `target`: from the registry's tarball, whose sha512 must be
    INTEGRITY. Nothing is fetched when `target` is there already."""
    if target.is_file():
        return target
    url = f"{registry()}/{NAME}/-/{NAME}-{VERSION}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            tarball = response.read()
    except OSError as exc:
        raise VendorError(f"cannot fetch {url}: {exc} (the dashboard's chart library comes "
                          "from the npm registry at build time; set npm_config_registry to a "
                          "mirror)") from None
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != INTEGRITY:
        raise VendorError(f"{url} is not the pinned {NAME} {VERSION} (sha512 differs)")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise VendorError(f"{url} holds no {MEMBER}")
        script = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    partial.write_bytes(script)
    partial.replace(target)
    return target


def chart_script() -> str:
    """The vendored library's source, for the pages to carry inline."""
    if not VENDORED.is_file():
        raise VendorError(f"{VENDORED} is missing: the package was built without its chart "
                          "library; reinstall it (pip install -e .) with the npm registry "
                          "reachable")
    return VENDORED.read_text(encoding="utf-8")
