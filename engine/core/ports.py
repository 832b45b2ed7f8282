"""A free TCP port for a server this process is about to start (the workbench, the local model, a test's stub).

A port the kernel hands out for `bind(("", 0))` lies in its ephemeral range, which every outgoing connection of
every process on the machine draws its local port from, and so does the next `bind(0)`: between the moment the
port is found free and the moment the server binds it, a browser's, a database client's or another server's
socket can take it ("Port 46495 is not available", seen once in a CI run of three test workers). A port below
that range is only ever taken by a server that names it, so one is drawn there instead and checked free.
"""
from __future__ import annotations

import random
import socket
from pathlib import Path

# Linux's ephemeral range; where the kernel says another, that one is kept clear of.
EPHEMERAL_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32768
LOWEST = 20000              # clear of the well-known and the commonly configured service ports
ATTEMPTS = 200


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that is free now and lies below the kernel's ephemeral range (any free port when that
    range leaves no room below it)."""
    low = _ephemeral_low()
    draw = random.SystemRandom()
    if low - LOWEST > ATTEMPTS:
        for _ in range(ATTEMPTS):
            port = draw.randrange(LOWEST, low)
            if _bindable(host, port):
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
