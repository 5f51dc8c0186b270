"""Whether anything answers at a Ray cluster's address before `ray.init` waits on it.

`ray.init(address="127.0.0.1:PORT")` where nothing listens retries its connection for
minutes (822 s seen) before one error line, with nothing printed meanwhile. A TCP connect
to the head's port answers at once where nothing listens, and within CONNECT_TIMEOUT_S
where the host cannot be reached, so a sweep given a wrong address says so in seconds,
naming it. Addresses that are no host:port (`auto`, `ray://...`) are left to Ray.
"""

from __future__ import annotations

import socket

from orchestrator.errors import DispatchError

CONNECT_TIMEOUT_S = 10.0


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """DispatchError, in one line naming `address`, where a host:port address does not
    accept a connection within `timeout_s`."""
    host, colon, port = address.rpartition(":")
    if not colon or "://" in address or not port.isdigit() or not host:
        return
    host = host.strip("[]")  # [::1]:6379
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except OSError as exc:
        why = f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError) else \
            (exc.strerror or str(exc)).lower()
        raise DispatchError(f"cannot reach Ray at {address}: {why} (is the cluster's head "
                            "running there? `ray status` on it says; or run without "
                            "--ray-address)") from None
