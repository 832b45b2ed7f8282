"""A server's port is drawn below the kernel's ephemeral range, where no outgoing connection can take it before
the server binds it (engine/core/ports.py)."""
from __future__ import annotations

import socket

from engine.core import ports


def test_a_free_port_lies_below_the_ephemeral_range_and_a_server_can_listen_on_it() -> None:
    low = ports._ephemeral_low()
    drawn = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= p < low for p in drawn) and len(drawn) > 1
    port = drawn.pop()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert not ports._bindable("127.0.0.1", port)     # taken while the server listens


def test_a_range_with_no_room_below_it_falls_back_to_the_kernels_choice(tmp_path, monkeypatch) -> None:
    (tmp_path / "range").write_text("1024\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_FILE", tmp_path / "range")
    port = ports.free_port()
    assert port >= 1024 and ports._bindable("127.0.0.1", port)
