"""One MySQL connection: mysql-mimic's handshake and packets, kbsql's commands.

mysql-mimic (`Connection`) does the handshake, authentication and packet encoding. The
command loop is kbsql's, because the door needs what mysql-mimic does not do:

- a failed login ends the connection (mysql-mimic goes on to read commands);
- statements run in the HTTP server's SQL lane (`server/lanes.py`), never on the event loop
  nor among catalog reads; a client that goes away mid-statement has it interrupted, and a
  full lane answers MySQL's "too many connections" error (1040) after its short queue;
- a result goes out batch by batch, each encoded in a worker and drained before the next
  (mysql-mimic buffers a whole result before sending any of it);
- prepared statements bind their values as literals (`prepared.py`);
- bad input ends that connection alone: a packet over the size limit gets MySQL's
  "packet too large" error, a malformed one (a wrong sequence number, a short field, a
  handshake without its terminators, which makes mysql-mimic's parser loop forever) ends the
  connection; the door logs one line for each (`door.py`).
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
import sys
from typing import Any

from mysql_mimic.charset import CharacterSet
from mysql_mimic.connection import Connection
from mysql_mimic.errors import ErrorCode, MysqlError
from mysql_mimic.packets import make_column_count, make_column_definition_41
from mysql_mimic.results import ResultColumn
from mysql_mimic.stream import ConnectionClosed
from mysql_mimic.types import Capabilities, ColumnDefinition, ColumnType, Commands, ServerStatus

from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.control import Control
from kbsql.interface.errors import Busy
from kbsql.interface.literals import ParameterError
from kbsql.server.connection_shares import TOO_MANY
from kbsql.server.door_bounds import MB, DoorBounds, HeldBytes, Unread
from kbsql.server.lanes import WATCH_AFTER_S, Lane, controlled
from kbsql.server.limits import check_sql_size
from kbsql.server.mysql import error_codes, metadata, prepared
from kbsql.server.mysql.framing import (
    BoundedStream,
    ClientStalled,
    MalformedPacket,
    PacketTooLarge,
    change_user_is_complete,
    handshake_is_complete,
)
from kbsql.server.mysql.resultsets import Answer, Encoded, Failed, Ok, Rows, Unsendable
from kbsql.server.mysql.router import DoorSession

_STATEMENT_COMMANDS = frozenset({
    Commands.COM_STMT_EXECUTE, Commands.COM_STMT_PREPARE, Commands.COM_STMT_CLOSE,
    Commands.COM_STMT_RESET, Commands.COM_STMT_SEND_LONG_DATA, Commands.COM_STMT_FETCH,
})

UNREAD_AFTER_S = 1.0
"""A client that has not taken a batch of its answer in this long counts as not reading it."""
log = logging.getLogger("kbsql.server")

# mysql-mimic's set, without query attributes (no use here, and one more way to send bytes)
CAPABILITIES = (Capabilities.CLIENT_PROTOCOL_41 | Capabilities.CLIENT_DEPRECATE_EOF
                | Capabilities.CLIENT_CONNECT_WITH_DB | Capabilities.CLIENT_CONNECT_ATTRS
                | Capabilities.CLIENT_PLUGIN_AUTH | Capabilities.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
                | Capabilities.CLIENT_SECURE_CONNECTION | Capabilities.CLIENT_LONG_PASSWORD
                | Capabilities.CLIENT_TRANSACTIONS | Capabilities.CLIENT_ODBC
                | Capabilities.CLIENT_INTERACTIVE | Capabilities.CLIENT_IGNORE_SPACE
                | Capabilities.CLIENT_LONG_FLAG)

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


class LoginFailed(Exception):
    """The handshake ended with access denied (the client was told)."""


class DoorConnection(Connection):
    """A mysql-mimic connection whose commands kbsql answers (see the module docstring)."""

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

    # --- login ----------------------------------------------------------------------------
    async def _start(self) -> None:
        try:
            async with asyncio.timeout(self.login_timeout):
                await self.connection_phase()
        except TimeoutError:
            raise ClientStalled(f"the client did not log in within {self.login_timeout:g} s") from None
        if self.session.username is None:
            raise LoginFailed()
        if self.on_login is not None:
            self.on_login()
        if not self.session.database:
            self.session.database = DEFAULT_PROJECT
        await self.session.init(self)
        self.session.connection_id = self.connection_id
        await self.command_phase()

    async def connection_phase(self) -> None:
        self.stream.check_next = self._check_handshake
        await super().connection_phase()

    def _check_handshake(self, data: bytes) -> None:
        if not handshake_is_complete(self.server_capabilities, data):
            raise MalformedPacket("a handshake response field has no terminator")

    async def handle_change_user(self, data: bytes) -> None:
        if not change_user_is_complete(data):
            raise MalformedPacket("a COM_CHANGE_USER field has no terminator")
        self.session.username = None
        await super().handle_change_user(data)
        if self.session.username is None:
            raise LoginFailed()
        self.forget_statements()
        if not self.session.database:
            self.session.database = DEFAULT_PROJECT

    # --- commands ---------------------------------------------------------------------------
    async def command_phase(self) -> None:
        while not self.closing:
            try:
                data = await self.stream.read()
            except ConnectionClosed:
                return
            except PacketTooLarge as exc:
                await self.stream.write(self.error_of(
                    error_codes.PACKET_TOO_LARGE,
                    f"The statement ({exc.size} bytes or more) is over this server's limit of "
                    f"{self.session.limits.max_sql} bytes (kbsql serve --max-sql-kb); "
                    "the connection is closed"))
                raise
            if not data:
                raise MalformedPacket("an empty command packet")
            self.busy = True
            try:
                if not await self.dispatch(data[0], data[1:]):
                    return
            except MysqlError as exc:
                await self.stream.write(self.error_of(int(exc.code), exc.msg))
            except ParameterError as exc:
                await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, str(exc)))
            except Busy as exc:  # the SQL lane stayed full past its queue
                await self.stream.write(self.error_of(error_codes.TOO_MANY_CONNECTIONS, exc.detail))
            except UnicodeDecodeError as exc:
                await self.stream.write(self.error_of(
                    error_codes.UNKNOWN_ERROR, f"The statement is not UTF-8 text (byte {exc.start}): "
                    "kbsql reads and sends utf8mb4"))
            except (prepared.BadParameters, struct.error, IndexError, ValueError) as exc:
                raise MalformedPacket(f"command {data[0]:#x}: {exc}") from None
            finally:
                self.busy = False
                self.stream.reset_seq()

    async def dispatch(self, command: int, rest: bytes) -> bool:
        """Answer one command; False when the client said goodbye."""
        if command == Commands.COM_QUERY:
            await self.send(await self.statement_call(self._answer, rest.decode("utf-8"), False), False)
        elif command in _STATEMENT_COMMANDS:
            await self.statement_command(command, rest)
        elif command == Commands.COM_QUIT:
            return False
        elif command == Commands.COM_PING or command == Commands.COM_DEBUG:
            await self.stream.write(self.ok())
        elif command == Commands.COM_INIT_DB:
            answer = await self.in_lane(self.session.use, rest.decode("utf-8"))
            await self.send(answer, False)
        elif command == Commands.COM_FIELD_LIST:
            await self.handle_field_list(rest)
        elif command == Commands.COM_CHANGE_USER:
            await self.handle_change_user(rest)
        elif command == Commands.COM_RESET_CONNECTION:
            self.forget_statements()
            await self.stream.write(self.ok())
        elif command == Commands.COM_SET_OPTION:
            await self.stream.write(self.ok_or_eof())
        elif command == Commands.COM_STATISTICS:
            await self.stream.write(b"Uptime: 0  Threads: 1  Questions: 0  Slow queries: 0  Opens: 0  "
                                    b"Open tables: 0  Queries per second avg: 0.000")
        else:
            await self.stream.write(self.error_of(error_codes.UNKNOWN_COMMAND,
                                                  f"Unknown command {command:#x}"))
        return True

    async def statement_command(self, command: int, rest: bytes) -> None:
        """The prepared-statement commands (the binary protocol)."""
        if command == Commands.COM_STMT_EXECUTE:
            await self.handle_stmt_execute(rest)
        elif command == Commands.COM_STMT_PREPARE:
            await self.handle_stmt_prepare(rest)
        elif command == Commands.COM_STMT_CLOSE:
            statement_id = struct.unpack("<I", rest[:4])[0]
            closed = self.statements.pop(statement_id, None)
            if closed is not None:
                self._unhold(closed.held)
            self.cursors.pop(statement_id, None)
        elif command == Commands.COM_STMT_RESET:
            statement = self.statement(struct.unpack("<I", rest[:4])[0])
            self._drop_long_data(statement)
            statement.refused = None
            self.cursors.pop(statement.stmt_id, None)
            await self.stream.write(self.ok())
        elif command == Commands.COM_STMT_SEND_LONG_DATA:
            self.long_data(rest)
        else:  # COM_STMT_FETCH
            await self.handle_stmt_fetch(rest)

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

    # --- prepared statements ----------------------------------------------------------------
    def statement(self, statement_id: int) -> prepared.Prepared:
        found = self.statements.get(statement_id)
        if found is None:
            raise MysqlError(f"Unknown prepared statement handler ({statement_id})",
                             error_codes.UNKNOWN_STATEMENT)  # type: ignore[arg-type]
        return found

    async def handle_stmt_prepare(self, data: bytes) -> None:
        sql = data.decode("utf-8")
        too_big = check_sql_size(sql, self.session.limits)
        if too_big is not None:
            await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, too_big))
            return
        if len(self.statements) >= self.bounds.mysql_max_prepared:
            await self.stream.write(self.error_of(
                error_codes.MAX_PREPARED, f"This connection holds {len(self.statements)} prepared "
                "statements, the most it may (kbsql serve --mysql-max-prepared): close some"))
            return
        refusal = self._hold(len(sql))
        if refusal is not None:
            await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, refusal))
            return
        statement = prepared.Prepared(self.next_statement, sql, prepared.placeholders(sql))
        self.next_statement += 1
        self.statements[statement.stmt_id] = statement
        count = len(statement.placeholders)
        packets = [b"\x00" + struct.pack("<IHHBH", statement.stmt_id, 0, count, 0, 0)]
        if count:
            packets += [make_column_definition_41(server_charset=self.server_charset, name="?")] * count
            if not self.deprecate_eof():
                packets.append(self.eof())
        self.stream.write_many(packets)
        await self.stream.drain()

    def _hold(self, size: int) -> str | None:
        """Count `size` more bytes of prepared statements; the refusal's one line instead
        when that would pass this connection's bound or all connections' bound."""
        mine, every = self.bounds.mysql_held, self.held.limit
        if self.held_here + size > mine:
            return (f"This connection's prepared statements and long data would hold "
                    f"{(self.held_here + size) / MB:.2f} MB, over its limit of {mine / MB:g} MB "
                    "(kbsql serve --mysql-held-mb): close some statements")
        if not self.held.take(size):
            return (f"All connections' prepared statements and long data hold {self.held.total / MB:.1f} MB, "
                    f"near the server's limit of {every / MB:g} MB (kbsql serve --mysql-total-held-mb): "
                    "close some statements or try again later")
        self.held_here += size
        return None

    def _unhold(self, size: int) -> None:
        size = min(size, self.held_here)
        self.held_here -= size
        self.held.give(size)

    def _drop_long_data(self, statement: prepared.Prepared) -> None:
        self._unhold(statement.held - len(statement.sql))
        statement.long_data.clear()

    def forget_statements(self) -> None:
        """Close every prepared statement and cursor (a reset, a new user, the end)."""
        self._unhold(self.held_here)
        self.statements.clear()
        self.cursors.clear()

    def long_data(self, data: bytes) -> None:
        """COM_STMT_SEND_LONG_DATA, which has no answer: data past a bound is dropped and the
        statement's next execute answers why (as MySQL does)."""
        statement_id, parameter = struct.unpack("<IH", data[:6])
        statement = self.statement(statement_id)
        if statement.refused is not None:
            return
        refusal = self._hold(len(data) - 6)
        if refusal is not None:
            self._drop_long_data(statement)
            statement.refused = refusal
            return
        statement.long_data.setdefault(parameter, bytearray()).extend(data[6:])

    async def handle_stmt_execute(self, data: bytes) -> None:
        reader = io.BytesIO(data)
        statement_id, flags, _iterations = struct.unpack("<IBI", reader.read(9))
        statement = self.statement(statement_id)
        if statement.refused is not None:
            refusal, statement.refused = statement.refused, None
            await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, refusal))
            return
        long_data = statement.held - len(statement.sql)
        try:
            values = prepared.read_execute(statement, reader)  # drops the long data
        finally:
            self._unhold(long_data)
        sql = prepared.bind(statement, values)
        answer = await self.statement_call(self._answer, sql, True)
        if not flags & 0x01 or not isinstance(answer, Encoded):  # no cursor asked, or no rows
            await self.send(answer, True)
            return
        if statement_id not in self.cursors and len(self.cursors) >= self.bounds.mysql_max_cursors:
            await self.stream.write(self.error_of(
                error_codes.UNKNOWN_ERROR, f"This connection has {len(self.cursors)} cursors open, the "
                "most it may (kbsql serve --mysql-max-cursors): fetch them to their end or reset "
                "their statements"))
            return
        self.cursors[statement_id] = (answer, [])
        self.stream.write_many(self.result_header(answer.columns))
        await self.stream.write(self.ok_or_eof(flags=ServerStatus.SERVER_STATUS_CURSOR_EXISTS))

    async def handle_stmt_fetch(self, data: bytes) -> None:
        statement_id, wanted = struct.unpack("<II", data[:8])
        self.statement(statement_id)
        cursor = self.cursors.get(statement_id)
        if cursor is None:
            raise MysqlError("The statement has no open cursor", error_codes.UNKNOWN_STATEMENT)  # type: ignore[arg-type]
        encoded, pending = cursor
        sent = 0
        while sent < wanted:
            if not pending:
                try:
                    pending = await self.in_lane(encoded.next_batch) or []
                except Unsendable as exc:
                    self.cursors.pop(statement_id, None)
                    await self.stream.write(self.error_of(error_codes.UNKNOWN_ERROR, str(exc)))
                    return
                if not pending:
                    break
            take = pending[:wanted - sent]
            pending = pending[len(take):]
            self.stream.write_many(take)
            await self.stream.drain()
            sent += len(take)
        done = sent < wanted
        if done:
            self.cursors.pop(statement_id, None)
        else:
            self.cursors[statement_id] = (encoded, pending)
        await self.stream.write(self.ok_or_eof(flags=ServerStatus.SERVER_STATUS_LAST_ROW_SENT if done
                                               else ServerStatus.SERVER_STATUS_CURSOR_EXISTS))

    async def handle_field_list(self, data: bytes) -> None:
        end = data.find(b"\x00")
        table = data[:end if end >= 0 else len(data)].decode("utf-8")
        try:
            rows = await self.in_lane(metadata.show_columns, self.session.api, self.session.db, table, None,
                                   False)
        except metadata.Refused as exc:
            await self.stream.write(self.error_of(error_codes.code_of(exc.result.kind),
                                                  exc.result.error_message))
            return
        self.stream.write_many([make_column_definition_41(server_charset=self.server_charset, table=table,
                                                          name=row[0], is_com_field_list=True)
                                for row in rows])
        await self.stream.write(self.ok_or_eof())
