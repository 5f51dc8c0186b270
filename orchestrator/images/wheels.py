"""A wheelhouse served on loopback to an image build's pip, so an offline build installs
from a folder of wheels without copying them into a layer or the build context."""

from __future__ import annotations

import contextlib
import functools
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def served(wheelhouse: Path | None) -> Iterator[str | None]:
    """Serve a wheelhouse on loopback for the build's pip (the build runs with the host's
    network): no copy of the wheels enters a layer or the build context."""
    if wheelhouse is None:
        yield None
        return
    handler = functools.partial(_QuietHandler, directory=str(wheelhouse))
    server = _WheelServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class _WheelServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-download (its build step was stopped) is no error of ours."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

