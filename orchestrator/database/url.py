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
from urllib.parse import urlsplit, urlunsplit

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
        """`text` with this URL's password (and the URL itself) replaced: for driver errors,
        which may quote what they were given."""
        text = text.replace(self.secret, self.shown)
        password = self.password
        return text.replace(password, "***") if password else text


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
    parts = urlsplit(text)
    if not parts.hostname and "host=" not in parts.query:
        raise StoreURLError(f"results store {redacted(text)!r}: a PostgreSQL URL names its "
                            "host (postgresql://USER@HOST:PORT/DB)")
    return StoreURL("postgresql", text, redacted(text))


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
