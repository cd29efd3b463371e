"""A MySQL client by hand, on a raw socket: what the tests need to send what no driver sends."""

from __future__ import annotations

import socket
import struct

from kbsql.server.process import ServerProcess

CAPS = 0x0200 | 0x8000 | 0x00080000  # PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH


def packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def read_packet(sock: socket.socket) -> tuple[int, bytes]:
    header = recv_exact(sock, 4)
    return header[3], recv_exact(sock, int.from_bytes(header[:3], "little"))


def recv_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data


def handshake_response(user: bytes = b"raw") -> bytes:
    return (struct.pack("<IIB", CAPS, 1 << 24, 45) + bytes(23) + user + b"\x00" + b"\x00"
            + b"mysql_native_password\x00")


def logged_in(server: ServerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.mysql_port), timeout=10)
    read_packet(sock)  # the server's greeting
    sock.sendall(packet(1, handshake_response()))
    _, ok = read_packet(sock)
    assert ok[0] == 0, ok
    return sock
