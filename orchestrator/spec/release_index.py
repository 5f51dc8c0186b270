"""Ask the package index whether a framework version newer than the release tables exists.

The tables in framework_builds.py are older than the next release, so a version past them
is only a warning at load. `matrix validate` asks the package index pip would use
(MATRIX_BENCH_INDEX_URL, else PIP_INDEX_URL, else PyPI) through its simple API (PEP 503
pages or PEP 691 JSON) and refuses a version the index does not list, or lists only as
yanked. One wait of at most TIMEOUT_S in all: an index that does not answer in time, or
`--offline`, keeps the warning and says why the version could not be checked.

The URL may carry a user and password (a private index): they go into the request's
Authorization header, and `shown` is the URL without them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from orchestrator.worker.stack_check import version_matches

ENV = "MATRIX_BENCH_INDEX_URL"
PYPI = "https://pypi.org/simple/"
TIMEOUT_S = 5.0
MAX_PAGE_BYTES = 64 * 2**20  # torch's page on PyPI is a few MB
JSON_TYPE = "application/vnd.pypi.simple.v1+json"

Released = Literal["released", "absent", "unchecked"]


@dataclass
class ReleaseIndex:
    """The package index `validate` asks; `why_unchecked` says why it gave no answer."""

    url: str
    timeout_s: float = TIMEOUT_S
    why_unchecked: str = ""
    _deadline: float | None = field(default=None, repr=False)

    @classmethod
    def here(cls) -> ReleaseIndex:
        """The index this process's environment names."""
        return cls(os.environ.get(ENV) or os.environ.get("PIP_INDEX_URL") or PYPI)

    @classmethod
    def offline(cls) -> ReleaseIndex:
        return cls("", why_unchecked="--offline")

    @property
    def shown(self) -> str:
        """The URL without its user and password."""
        parts = urlsplit(self.url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=host))

    def released(self, project: str, version: str) -> Released:
        """Whether `version` ("2.13" stands for any 2.13.x; a local "+cpu" is ignored) of
        `project` is an unyanked release on this index; "unchecked" once it failed to answer."""
        if self.why_unchecked:
            return "unchecked"
        if self._deadline is None:
            self._deadline = time.monotonic() + self.timeout_s
        try:
            versions = self._versions(project, self._deadline)
        except (OSError, ValueError) as exc:  # URLError, HTTPError, a page not understood
            self.why_unchecked = (
                f"the package index {self.shown} did not answer in {self.timeout_s:g} s"
                if isinstance(exc, TimeoutError) or "timed out" in str(exc) else
                f"the package index {self.shown} could not be read: {_reason(exc)}")
            return "unchecked"
        public = version.split("+")[0]
        return "released" if any(version_matches(public, v) for v in versions) else "absent"

    def _versions(self, project: str, deadline: float) -> set[str]:
        """The versions with at least one unyanked file on the project's page, read by
        `deadline` (TimeoutError past it)."""
        if time.monotonic() >= deadline:
            raise TimeoutError
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {parts.scheme}")
        page = urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1],
                                         path=parts.path.rstrip("/") + f"/{project}/"))
        import urllib.error
        import urllib.request  # here: http.client and ssl cost every other command

        request = urllib.request.Request(page, headers={
            "Accept": f"{JSON_TYPE}, text/html;q=0.1"})
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            request.add_header("Authorization",
                               "Basic " + base64.b64encode(pair.encode()).decode())
        try:
            answer = urllib.request.urlopen(request,
                                            timeout=max(deadline - time.monotonic(), 0.01))
        except urllib.error.HTTPError as exc:
            if exc.code == 404:  # no such project here: pip could not install it either
                return set()
            raise
        with answer:
            kind = answer.headers.get_content_type()
            body = b""
            while chunk := answer.read(2**20):  # a page that trickles still ends in time
                body += chunk
                if time.monotonic() > deadline:
                    raise TimeoutError
                if len(body) > MAX_PAGE_BYTES:
                    raise ValueError("page too large")
        files = _json_files(body) if kind == JSON_TYPE else _html_files(body.decode())
        return {v for name, yanked in files if not yanked and (v := _version_of(name, project))}


def _reason(exc: Exception) -> str:
    """What went wrong, without the URL (which could carry a password)."""
    code = getattr(exc, "code", None)
    if code is not None:
        return f"HTTP {code}"
    reason = getattr(exc, "reason", exc)
    return getattr(reason, "strerror", None) or type(reason).__name__


def _json_files(body: bytes) -> list[tuple[str, bool]]:
    page = json.loads(body)
    files = page.get("files") if isinstance(page, dict) else None
    if not isinstance(files, list):
        raise ValueError("a JSON page without a list of files")
    return [(str(f.get("filename", "")), bool(f.get("yanked"))) for f in files
            if isinstance(f, dict)]


class _Anchors(HTMLParser):
    """The text and yanked mark of each <a> of a PEP 503 page."""

    def __init__(self) -> None:
        super().__init__()
        self.files: list[tuple[str, bool]] = []
        self._yanked: bool | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._yanked = any(name == "data-yanked" for name, _ in attrs)

    def handle_data(self, data: str) -> None:
        if self._yanked is not None:
            self.files.append((data.strip(), self._yanked))
            self._yanked = None


def _html_files(text: str) -> list[tuple[str, bool]]:
    parser = _Anchors()
    parser.feed(text)
    return parser.files


def _version_of(filename: str, project: str) -> str | None:
    """The version in a wheel's or an sdist's file name (PEP 427, PEP 625), or None."""
    stem = re.sub(r"\.(whl|tar\.gz|zip|tar\.bz2)$", "", filename)
    if stem == filename:
        return None
    name = re.sub(r"[-_.]+", "_", project).lower()
    if filename.endswith(".whl"):
        parts = stem.split("-")
        return parts[1] if len(parts) >= 5 and parts[0].lower() == name else None
    head, _, version = stem.rpartition("-")
    return version if re.sub(r"[-_.]+", "_", head).lower() == name else None
