"""One MySQL connection: mysql-mimic's handshake and packets, kbsql's commands.

mysql-mimic (`Connection`) does the handshake, authentication and packet encoding. The
command loop is kbsql's, because the door needs what mysql-mimic does not do:

- a failed login ends the connection (mysql-mimic goes on to read commands);
- statements run in the HTTP server's SQL lane (`server/lanes.py`), never on the event loop
  nor among catalog reads; a client that goes away mid-statement has it interrupted, and a
  full lane answers MySQL's "too many connections" error (1040) after its short queue;
- a result goes out batch by batch, each encoded in a worker and drained before the next
  (mysql-mimic buffers a whole result before sending any of it: `answers.py`, the base);
- prepared statements bind their values as literals (`prepared_commands.py`, `prepared.py`);
- bad input ends that connection alone: a packet over the size limit gets MySQL's
  "packet too large" error, a malformed one (a wrong sequence number, a short field, a
  handshake without its terminators, which makes mysql-mimic's parser loop forever) ends the
  connection; the door logs one line for each (`door.py`).
"""

from __future__ import annotations

import asyncio
import struct

from mysql_mimic.errors import MysqlError
from mysql_mimic.packets import make_column_definition_41
from mysql_mimic.stream import ConnectionClosed
from mysql_mimic.types import Capabilities, Commands

from kbsql.interface.api import DEFAULT_PROJECT
from kbsql.interface.errors import Busy
from kbsql.interface.literals import ParameterError
from kbsql.server.mysql import error_codes, metadata, prepared
from kbsql.server.mysql.framing import (
    ClientStalled,
    MalformedPacket,
    PacketTooLarge,
    change_user_is_complete,
    handshake_is_complete,
)
from kbsql.server.mysql.prepared_commands import PreparedCommands

_STATEMENT_COMMANDS = frozenset({
    Commands.COM_STMT_EXECUTE, Commands.COM_STMT_PREPARE, Commands.COM_STMT_CLOSE,
    Commands.COM_STMT_RESET, Commands.COM_STMT_SEND_LONG_DATA, Commands.COM_STMT_FETCH,
})


# mysql-mimic's set, without query attributes (no use here, and one more way to send bytes)
CAPABILITIES = (Capabilities.CLIENT_PROTOCOL_41 | Capabilities.CLIENT_DEPRECATE_EOF
                | Capabilities.CLIENT_CONNECT_WITH_DB | Capabilities.CLIENT_CONNECT_ATTRS
                | Capabilities.CLIENT_PLUGIN_AUTH | Capabilities.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
                | Capabilities.CLIENT_SECURE_CONNECTION | Capabilities.CLIENT_LONG_PASSWORD
                | Capabilities.CLIENT_TRANSACTIONS | Capabilities.CLIENT_ODBC
                | Capabilities.CLIENT_INTERACTIVE | Capabilities.CLIENT_IGNORE_SPACE
                | Capabilities.CLIENT_LONG_FLAG)


class LoginFailed(Exception):
    """The handshake ended with access denied (the client was told)."""


class DoorConnection(PreparedCommands):
    """A mysql-mimic connection whose commands kbsql answers (see the module docstring)."""

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
