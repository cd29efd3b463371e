"""What a MySQL connection of the door sends: statements' answers and the packets around them.

The base of `prepared_commands.PreparedCommands` (the binary protocol) and so of
`connection.DoorConnection` (the login and the command loop): the connection's state, its
engine calls (in the SQL lane, stopped when the client goes away) and the encoding of an
answer, rows batch by batch, each drained before the next (mysql-mimic buffers a whole
result before sending any of it), a client that stops reading counted in the door's unread
answers.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from mysql_mimic.charset import CharacterSet
from mysql_mimic.connection import Connection
from mysql_mimic.errors import ErrorCode
from mysql_mimic.packets import make_column_count, make_column_definition_41
from mysql_mimic.results import ResultColumn
from mysql_mimic.types import ColumnDefinition, ColumnType, ServerStatus

from kbsql.interface.control import Control
from kbsql.server.connection_shares import TOO_MANY
from kbsql.server.door_bounds import DoorBounds, HeldBytes, Unread
from kbsql.server.lanes import WATCH_AFTER_S, Lane, controlled
from kbsql.server.mysql import error_codes, prepared
from kbsql.server.mysql.framing import BoundedStream
from kbsql.server.mysql.resultsets import Answer, Encoded, Failed, Ok, Rows, Unsendable
from kbsql.server.mysql.router import DoorSession

UNREAD_AFTER_S = 1.0
"""A client that has not taken a batch of its answer in this long counts as not reading it."""

_NUMERIC = {ColumnType.TINY, ColumnType.SHORT, ColumnType.LONG, ColumnType.LONGLONG, ColumnType.DOUBLE,
            ColumnType.NEWDECIMAL, ColumnType.FLOAT, ColumnType.INT24, ColumnType.DECIMAL}
_NUM_FLAG = ColumnDefinition.PART_KEY_FLAG
"""MySQL's NUM_FLAG (32768, mysql_com.h); mysql-mimic's enum swaps it with PART_KEY_FLAG.
Numbers carry it alone and dates and times carry BINARY_FLAG, as MindsDB sends them (its
`DATA_C_TYPE_MAP`, taken from a MySQL server's answers; its test_response_types checks them)."""

_LENGTHS = {ColumnType.TINY: 4, ColumnType.SHORT: 6, ColumnType.LONG: 11, ColumnType.LONGLONG: 20,
            ColumnType.DOUBLE: 22, ColumnType.FLOAT: 12, ColumnType.NEWDECIMAL: 65, ColumnType.DATE: 10,
            ColumnType.DATETIME: 26,
            ColumnType.TIMESTAMP: 26, ColumnType.TIME: 17}


class AnsweringConnection(Connection):
    """A mysql-mimic connection's state, engine calls and answers (see the module docstring)."""

    session: DoorSession
    stream: BoundedStream

    def __init__(self, *args: Any, login_timeout: float, lane: Lane, bounds: DoorBounds, held: HeldBytes,
                 unread: Unread | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.unread = unread if unread is not None else Unread(sys.maxsize, "MySQL")
        """The answers all connections hold for clients not reading them (the door's)."""
        self.login_timeout = login_timeout
        self.lane = lane
        """Where this connection's engine calls run: the server's SQL lane."""
        self.bounds = bounds
        self.held = held
        """What all connections' prepared statements hold (the door's)."""
        self.held_here = 0
        """What this one's hold (text and long data), counted in `held` too."""
        self.on_login: Any = None
        self.owner: str | None = None
        """The login's fair-share owner (`identity.DoorPassword.owner`), set once logged in."""
        """Called once the client has logged in (the door stops counting it as pending)."""
        self.evicted = False
        self.statements: dict[int, prepared.Prepared] = {}
        self.cursors: dict[int, tuple[Encoded, list[bytes]]] = {}
        self.next_statement = 1
        self.busy = False
        """True while a command is being answered (a shutdown lets it finish)."""
        self.closing = False

    # --- engine calls -----------------------------------------------------------------------
    async def in_lane(self, fn: Any, *args: Any) -> Any:
        """`fn(*args)` in a worker of the SQL lane."""
        return await self.lane.run(fn, *args, owner=self.owner)

    async def statement_call(self, fn: Any, *args: Any) -> Any:
        """`in_lane` for a statement, under a `Control` the engine reads (its deadline too):
        when the client goes away while it runs, the statement is interrupted (as over
        HTTP, `lanes.controlled`). A MySQL client sends nothing while it waits for an answer,
        so an end of its stream means it is gone."""
        return await controlled(self._gone, Control(), fn, *args, lane=self.lane, owner=self.owner)

    async def _gone(self) -> None:
        """Returns once the client's stream has ended (checked every `WATCH_AFTER_S`)."""
        reader = self.stream.reader
        # at_eof() is False while unread bytes are buffered (a COM_QUIT sent before the
        # close); the reader's own flag says the stream has ended all the same
        while not (reader.at_eof() or getattr(reader, "_eof", False) or reader.exception() is not None):
            await asyncio.sleep(WATCH_AFTER_S)

    # --- a statement's answer ---------------------------------------------------------------
    def _answer(self, sql: str, binary: bool) -> Answer | Encoded:
        """A statement's answer, its first batch of rows already encoded (worker thread)."""
        answer = self.session.answer(sql)
        if not isinstance(answer, Rows):
            return answer
        try:
            return answer.encoded(binary).prefetch()
        except Unsendable as exc:
            return Failed(str(exc))

    # --- answers ----------------------------------------------------------------------------
    def status(self) -> ServerStatus:
        autocommit = self.session.variables.get_variable("autocommit")
        return ServerStatus.SERVER_STATUS_AUTOCOMMIT if autocommit else ServerStatus(0)

    def ok(self, **kwargs: Any) -> bytes:
        self.status_flags = self.status()
        return super().ok(**kwargs)

    def eof(self, **kwargs: Any) -> bytes:
        self.status_flags = self.status()
        return super().eof(**kwargs)

    def error_of(self, code: int, message: str) -> bytes:
        return error_codes.error_packet(self.capabilities, code, message)

    def error(self, **kwargs: Any) -> bytes:
        """mysql-mimic answers every refused login 1045 (access denied); one the connection cap
        refuses (connection_shares) is MySQL's 1040, too many connections: a client retries
        later rather than asking for another password."""
        if kwargs.get("code") == ErrorCode.ACCESS_DENIED_ERROR and \
                str(kwargs.get("msg") or "").startswith(TOO_MANY):
            kwargs["code"] = ErrorCode.CON_COUNT_ERROR
        return super().error(**kwargs)

    def column_definition(self, column: ResultColumn) -> bytes:
        flags = ColumnDefinition(0)
        kind = column.type
        if kind in _NUMERIC:
            flags |= _NUM_FLAG
        if kind in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP, ColumnType.TIME):
            flags |= ColumnDefinition.BINARY_FLAG
        if kind in (ColumnType.BLOB, ColumnType.JSON):
            flags |= ColumnDefinition.BLOB_FLAG
        if kind == ColumnType.JSON or (kind in (ColumnType.BLOB, ColumnType.STRING)
                                       and column.character_set == CharacterSet.binary):
            flags |= ColumnDefinition.BINARY_FLAG  # bytes; JSON as MindsDB flags it (TEXT: a text BLOB)
        binary = kind in _NUMERIC or kind in (ColumnType.DATE, ColumnType.DATETIME, ColumnType.TIMESTAMP,
                                              ColumnType.TIME, ColumnType.NULL)
        return make_column_definition_41(
            server_charset=self.server_charset, name=column.name, column_type=kind,
            character_set=CharacterSet.binary if binary else column.character_set,
            column_length=_LENGTHS.get(kind, 262140), flags=flags,
            decimals=31 if kind in (ColumnType.DOUBLE, ColumnType.FLOAT) else 0)

    def result_header(self, columns: list[ResultColumn]) -> list[bytes]:
        return [make_column_count(self.capabilities, len(columns)),
                *(self.column_definition(c) for c in columns)]

    async def send(self, answer: Answer | Encoded, binary: bool) -> None:
        """Write one statement's answer; rows batch by batch, each drained before the next."""
        if isinstance(answer, Failed):
            await self.stream.write(self.error_of(answer.code, answer.message))
            return
        if isinstance(answer, Ok):
            await self.stream.write(self.ok(affected_rows=answer.affected_rows))
            return
        assert isinstance(answer, Encoded)
        header = self.result_header(answer.columns)
        if not self.deprecate_eof():
            header.append(self.eof())
        self.stream.write_many(header)
        packets = answer.next_batch()
        while packets:
            self.stream.write_many(packets)
            await self._drain_holding(answer.held)
            try:
                packets = await self.in_lane(answer.next_batch)
            except Unsendable as exc:  # an error packet in place of the next row ends the result
                await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, str(exc)))
                return
        await self.stream.write(self.ok_or_eof())

    async def _drain_holding(self, held: int) -> None:
        """Wait until the client takes what is written. One that has not taken a batch within
        `UNREAD_AFTER_S` is counted in the door's unread answers with the whole result it
        holds: past --http-unread-mb, the connection that waited longest is closed and its
        result freed (12 clients that never read a 45 MB result held +735 MB for the 60 s
        write timeout). An answer the transport's buffer takes whole cannot wait (most are:
        `SELECT 1`), so it is drained without the timer and the task the wait needs."""
        transport = self.stream.writer.transport
        if self.stream.waiting() <= transport.get_write_buffer_limits()[1]:
            await self.stream.drain()
            return
        drained = asyncio.ensure_future(self.stream.drain())
        try:
            done, _ = await asyncio.wait({drained}, timeout=UNREAD_AFTER_S)
            if drained not in done:
                self.unread.paused(self, lambda: held + self.stream.waiting(), transport.abort)
                try:
                    await asyncio.shield(drained)
                finally:
                    self.unread.resumed(self)
            drained.result()
        finally:
            drained.cancel()  # only if this task was cancelled while it waited
