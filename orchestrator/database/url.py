"""Where the results store lives: `--db`, else `MATRIX_BENCH_DB`, else a SQLite file under
the folder `matrix run` starts from; and how its URL is shown: never with its password.

    sqlite:///reports/results.db     a path relative to the working folder
    sqlite:////srv/bench/results.db  an absolute path (four slashes, as SQLAlchemy writes it)
    postgresql://user:pass@host:5432/bench   (postgres:// too; libpq's query options pass)
    none                             no store: the sweep journals only
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from orchestrator.errors import MatrixError

ENV = "MATRIX_BENCH_DB"
DEFAULT = "sqlite:///reports/results.db"
OFF = "none"
SCHEMES = ("sqlite", "postgresql", "postgres")


class StoreURLError(MatrixError):
    """A store URL of a scheme matrix-bench cannot use, or without what its scheme needs."""


@dataclass(frozen=True)
class StoreURL:
    """A parsed store URL. `secret` is the text as given, password and all: it goes to the
    database driver and nowhere else; `shown` is what any message prints."""

    kind: Literal["sqlite", "postgresql"]
    secret: str
    shown: str
    path: Path | None = None  # sqlite: the database file

    @property
    def password(self) -> str | None:
        return urlsplit(self.secret).password if self.kind == "postgresql" else None

    def mask(self, text: str) -> str:
        """`text` with this URL (as `shown`) and every password in it replaced, as given and
        percent-decoded: for driver errors, which may quote either."""
        text = text.replace(self.secret, self.shown)
        for secret in sorted(passwords(self.secret), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def parse_url(text: str) -> StoreURL:
    """The store at `text`; StoreURLError (its message without any password) if unusable."""
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme not in SCHEMES:
        shown = redacted(text)
        raise StoreURLError(f"results store {shown!r}: unsupported scheme "
                            f"{scheme + ':' if scheme else '(none)'}; use sqlite:///PATH, "
                            "postgresql://USER@HOST/DB, or none")
    if scheme == "sqlite":
        if not text.startswith("sqlite:///") or len(text) == len("sqlite:///"):
            raise StoreURLError(f"results store {text!r}: a SQLite URL is sqlite:///PATH "
                                "(relative) or sqlite:////PATH (absolute)")
        return StoreURL("sqlite", text, text, Path(text[len("sqlite:///"):]))
    parts = _split(text)
    if parts.netloc.count("@") > 1:
        raise StoreURLError(f"results store {parts.scheme}://***: more than one '@' before "
                            "its host; percent-encode an '@' in the user or password as %40")
    if any(BAD_ESCAPE.search(secret) for secret in _given_passwords(parts)):
        raise StoreURLError(f"results store {parts.scheme}://***: its password is not valid "
                            "percent-encoding (a '%' without two hex digits): write '%' as "
                            "%25")
    if not parts.hostname and "host=" not in parts.query:
        raise StoreURLError(f"results store {redacted(text)!r}: a PostgreSQL URL names its "
                            "host (postgresql://USER@HOST:PORT/DB)")
    return StoreURL("postgresql", text, redacted(text))


BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _split(text: str) -> SplitResult:
    try:
        return urlsplit(text)
    except ValueError:  # "Invalid IPv6 URL" and the like: no part of it is shown
        raise StoreURLError(f"results store {text.split(':', 1)[0]}://***: not a URL "
                            "(postgresql://USER:PASSWORD@HOST:PORT/DB)") from None


def _given_passwords(parts: SplitResult) -> list[str]:
    """The passwords a URL gives, as written: in its authority and `password=` options."""
    found = [parts.password] if parts.password else []
    return found + re.findall(r"(?i)(?:^|&)password=([^&]*)", parts.query)


def passwords(text: str) -> set[str]:
    """Every password in a store URL, as written and percent-decoded (a driver's message
    may quote either)."""
    try:
        given = _given_passwords(urlsplit(text))
    except ValueError:
        return set()
    return {form for secret in given for form in (secret, unquote(secret)) if form}


def redacted(text: str) -> str:
    """A URL with its password (in the authority or a `password=` option) shown as ***."""
    try:
        parts = urlsplit(text)
        netloc = parts.netloc
        if parts.password is not None:
            user, _, host = netloc.rpartition("@")
            netloc = f"{user.split(':', 1)[0]}:***@{host}"
        query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # not even a URL: show its scheme only
        return text.split(":", 1)[0] + ":***"


def resolve(option: str | None) -> StoreURL | None:
    """The store a command uses: the option, the environment, or the default; None for
    `none`."""
    text = option or os.environ.get(ENV) or DEFAULT
    return None if text.strip().lower() == OFF else parse_url(text.strip())


def store_url(option: str | None) -> StoreURL:
    """The store `--db` names (MATRIX_BENCH_DB, the default); `none` is refused: a command
    that reads the store needs one."""
    url = resolve(option)
    if url is None:
        raise StoreURLError("--db none names no results store: give its URL")
    return url
