"""pip's settings on this machine, as uv's arguments: one per line on stdout.

bootstrap.sh installs with uv, which reads no pip.conf. A machine that points pip at a
mirror, a folder of wheels or a constraints file (a site proxy, an offline wheelhouse, a
version cap) means it for every installer, so its settings are handed on: index-url,
extra-index-url, find-links and constraint, from pip's config files and PIP_* variables
as `pip config list` reports them (the variables win, as in pip). A `cert` becomes the
line `SSL_CERT_FILE=<path>` and a timeout `UV_HTTP_TIMEOUT=<s>`: the caller exports those.

    python scripts/uv_settings.py [PIP_CONFIG_LIST_OUTPUT_FILE]

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import subprocess
import sys

FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "find-links": "--find-links", "constraint": "--constraint"}
VARIABLES = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT",
             "timeout": "UV_HTTP_TIMEOUT"}


def pip_settings(listing: str) -> dict[str, str]:
    """`pip config list`'s lines (`global.find-links='/opt/wheels'`, `:env:.cert='...'`) as
    {option: value}; environment entries override file entries, global ones install's."""
    ranked: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if not sep or "." not in key:
            continue
        section, option = key.rsplit(".", 1)
        rank = {":env:": 3, "install": 2, "global": 1}.get(section, 0)
        if rank and rank >= ranked.get(option, (0, ""))[0]:
            ranked[option] = (rank, value.strip().strip("'\""))
    return {option: value for option, (_, value) in ranked.items()}


def uv_arguments(settings: dict[str, str]) -> list[str]:
    """uv's command-line arguments and `NAME=value` lines for the settings it has a use for."""
    lines: list[str] = []
    for option, flag in FLAGS.items():
        for value in settings.get(option, "").split():
            lines += [flag, value]
    for option, variable in VARIABLES.items():
        if option in settings:
            lines.append(f"{variable}={settings[option]}")
    if any(option in settings for option in ("index-url", "extra-index-url", "find-links")):
        # pip takes the best version from all its sources together; uv's default takes the
        # first source that has a package at all, which a partial mirror would then cap
        lines += ["--index-strategy", "unsafe-best-match"]
    return lines


def main() -> None:
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as given:
            listing = given.read()
    else:
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                                 capture_output=True, text=True, check=False).stdout
    for line in uv_arguments(pip_settings(listing)):
        print(line)


if __name__ == "__main__":
    main()
