"""The binary protocol's commands of a MySQL connection of the door: COM_STMT_PREPARE,
EXECUTE (with a cursor, then FETCH), SEND_LONG_DATA, RESET and CLOSE.

Values bind as literals (`prepared.py`). What a connection's statements hold (their text and
long data) is counted against its own bound and all connections' (`--mysql-held-mb`,
`--mysql-total-held-mb`), their number and open cursors against `--mysql-max-prepared` and
`--mysql-max-cursors`: past any, one error line naming the flag.
"""

from __future__ import annotations

import io
import struct

from mysql_mimic.errors import MysqlError
from mysql_mimic.packets import make_column_definition_41
from mysql_mimic.types import Commands, ServerStatus

from kbsql.server.door_bounds import MB
from kbsql.server.limits import check_sql_size
from kbsql.server.mysql import error_codes, prepared
from kbsql.server.mysql.answers import AnsweringConnection
from kbsql.server.mysql.resultsets import Encoded, Unsendable


class PreparedCommands(AnsweringConnection):
    """The prepared-statement commands (see the module docstring)."""

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
