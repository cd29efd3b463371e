"""MySQL packets off the socket, bounded: one client can hold neither memory nor a worker.

mysql-mimic's stream reads whatever length a header claims and follows continuation packets
without end, and waits forever for a packet's body. This one refuses a command larger than
the door's limit as soon as its header says so (the SQL size limit of HTTP plus room for a
prepared statement's parameters), gives a packet's body `timeout` seconds to arrive once its
header has, and gives a stalled reader `write_timeout` seconds to take an answer. An idle
connection waits for its next command `idle_timeout` seconds (`--mysql-idle-timeout`, not
MySQL's 8 hours: idle connections would pile up).

`handshake_is_complete` and `change_user_is_complete` check the NUL-terminated fields of
the two packets mysql-mimic parses itself: its reader of such a field never returns when the
field has no terminator, which would freeze the event loop and with it the whole server.
"""

from __future__ import annotations

import asyncio
import io
import socket
import struct
from collections.abc import Callable, Sequence

from mysql_mimic.stream import ConnectionClosed, MysqlStream
from mysql_mimic.types import Capabilities, read_uint_len

MAX_PAYLOAD = 0xFFFFFF


class PacketTooLarge(Exception):
    def __init__(self, size: int, limit: int):
        super().__init__(f"a packet of {size} bytes or more, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class MalformedPacket(Exception):
    """The bytes do not follow the protocol: the connection cannot go on."""


class ClientStalled(Exception):
    """The client stopped sending in the middle of a packet, or stopped reading an answer."""


class BoundedStream:
    """`MysqlStream`'s interface with a size limit per command and deadlines (see the module
    docstring). It wraps one (mysql-mimic's compiled classes cannot be subclassed): packets
    are written and framed by it, read here."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 max_packet: int, timeout: float, write_timeout: float, idle_timeout: float):
        self.inner = MysqlStream(reader, writer)
        self.reader = reader
        self.writer = writer
        self.max_packet = max_packet
        self.timeout = timeout
        self.write_timeout = write_timeout
        self.idle_timeout = idle_timeout
        self.check_next: Callable[[bytes], None] | None = None
        """Called with the next packet read, once (the handshake response is checked so)."""

    async def read(self) -> bytes:
        data = await self._read()
        self.quickack()
        check, self.check_next = self.check_next, None
        if check is not None:
            check(data)
        return data

    async def _read(self) -> bytes:
        chunks: list[bytes] = []
        size = 0
        first = True
        while True:
            try:
                async with asyncio.timeout(self.idle_timeout if first else self.timeout):
                    header = await self.reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if first and not exc.partial:
                    raise ConnectionClosed() from None
                raise ClientStalled("the client closed the connection inside a packet header") from None
            except TimeoutError:
                if first:
                    raise ClientStalled(f"the client sent no command for {self.idle_timeout:g} s "
                                        "(kbsql serve --mysql-idle-timeout)") from None
                raise ClientStalled(f"a packet's header did not arrive in {self.timeout:g} s") from None
            first = False
            length = int.from_bytes(header[:3], "little")
            expected = next(self.inner.seq)
            if header[3] != expected:
                raise MalformedPacket(f"packet sequence {header[3]} where {expected} was expected")
            size += length
            if size > self.max_packet:
                raise PacketTooLarge(size, self.max_packet)
            if length:
                try:
                    async with asyncio.timeout(self.timeout):
                        chunks.append(await self.reader.readexactly(length))
                except asyncio.IncompleteReadError:
                    raise ClientStalled("the client closed the connection inside a packet") from None
                except TimeoutError:
                    raise ClientStalled(f"a packet's body did not arrive in {self.timeout:g} s") from None
            if length < MAX_PAYLOAD:
                return b"".join(chunks)

    async def write(self, data: bytes, drain: bool = True) -> None:
        await self.inner.write(data, drain=False)
        if drain:
            await self.drain()

    def write_many(self, packets: Sequence[bytes]) -> None:
        """Frame and buffer packets. A payload of 16 MB or more (a row holding a large text) goes
        as MySQL splits it: 0xFFFFFF-byte pieces, then the rest (empty when it divides evenly),
        each with its own sequence number; mysql-mimic's `write_many` gave it one header, its
        length running into the sequence byte (pymysql: "Packet sequence number wrong",
        mysql-connector waiting for bytes that never came)."""
        if all(len(packet) < MAX_PAYLOAD for packet in packets):
            self.inner.write_many(packets)
            return
        self.inner.write_many([piece for packet in packets for piece in _pieces(packet)])

    async def drain(self) -> None:
        try:
            async with asyncio.timeout(self.write_timeout):
                await self.inner.drain()
        except TimeoutError:
            raise ClientStalled(f"the client did not read its answer for {self.write_timeout:g} s "
                                "(kbsql serve --mysql-write-timeout)") from None

    def reset_seq(self) -> None:
        self.inner.reset_seq()

    def quickack(self) -> None:
        """Acknowledge what was read at once. A client that writes two packets back to back
        without TCP_NODELAY (mysql-connector-python closing one prepared statement, then
        preparing the next) has its second held by Nagle's algorithm until the first is
        acknowledged, and a command without an answer would otherwise wait for the delayed
        ACK: 40 ms a statement."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None and hasattr(socket, "TCP_QUICKACK"):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                pass

    def waiting(self) -> int:
        """Bytes of answers not yet taken by the client (framed here or in the socket's buffer)."""
        return len(self.inner._buffer) + self.writer.transport.get_write_buffer_size()


def _pieces(packet: bytes) -> list[bytes]:
    """One payload as the packets that carry it (see `BoundedStream.write_many`)."""
    if len(packet) < MAX_PAYLOAD:
        return [packet]
    # bytes, not memoryviews: mysql-mimic's write_many takes nothing else
    return [packet[at:at + MAX_PAYLOAD] for at in range(0, len(packet) + 1, MAX_PAYLOAD)]


def handshake_is_complete(capabilities: Capabilities, data: bytes) -> bool:
    """Whether every NUL-terminated field of a handshake response ends inside the packet
    (mysql-mimic's reader of such fields never returns at the end of its input)."""
    if len(data) <= 32:
        return True  # an SSL request, or short: mysql-mimic's struct reads fail cleanly
    both = capabilities & Capabilities(int.from_bytes(data[:4], "little"))
    end = data.find(b"\x00", 32)  # user name
    if end < 0:
        return False
    at = end + 1
    if at >= len(data):
        return False
    if Capabilities.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA in both:
        reader = io.BytesIO(data[at:])
        try:
            size = read_uint_len(reader)
        except struct.error:
            return False
        at += reader.tell() + size
    else:
        at += 1 + data[at]
    for flag in (Capabilities.CLIENT_CONNECT_WITH_DB, Capabilities.CLIENT_PLUGIN_AUTH):
        if flag in both:
            end = data.find(b"\x00", at)
            if end < 0:
                return False
            at = end + 1
    return True


def change_user_is_complete(data: bytes) -> bool:
    """The same for COM_CHANGE_USER: user name, auth response and database end with NULs."""
    end = data.find(b"\x00")
    if end < 0 or end + 1 >= len(data):
        return False
    at = end + 2 + data[end + 1]
    return data.find(b"\x00", at) >= 0
