"""Connections: embedded by default, a real `kbsql serve` by URL, aliases, switching, keys."""

from __future__ import annotations

import getpass
import re

import pytest

from kbsql.notebook.magics import KbSql

SECRET = "sk-live-0123456789abcdef"


def _manager(cells):
    return next(c for c in cells.shell.configurables if isinstance(c, KbSql)).manager


def _kb_on(client, name: str) -> None:
    client.knowledge_bases.create(name, embedding_model={"provider": "kbsql", "model_name": "hash-64"})


def test_first_query_opens_the_embedded_engine_in_kbsql_home(cells, tmp_path):
    assert cells.ok("%kbsql SELECT 1 AS a").shape == (1, 1)
    conn = _manager(cells).get()
    assert conn.alias == "default" and conn.client.is_embedded
    assert str(conn.client.api.data_dir) == str((tmp_path / "home").resolve())


def test_switching_between_embedded_and_a_server(cells, server_url, monkeypatch):
    monkeypatch.setenv("KBSQL_API_KEY", SECRET)
    local = _manager(cells).get().client
    _kb_on(local, "only_local")
    result, out = cells.run(f"%kbsql_connect {server_url} --alias remote")
    assert result.success, out
    assert "remote" in out and "api key set" in out and SECRET not in out
    remote = _manager(cells).get("remote").client
    assert not remote.is_embedded
    assert remote.api._http.headers["Authorization"] == f"Bearer {SECRET}"  # sent, never shown
    _kb_on(remote, "only_remote")

    remote.knowledge_bases.insert("only_remote", [{"id": 1, "content": "the pump moves water"}])

    # the current connection is the server now: its knowledge base is visible, the local one not
    frame = cells.ok("%kbsql SELECT * FROM only_remote")
    assert frame.shape == (1, 6)
    assert frame["relevance"].dtype == "float64" and frame["relevance"].isna().all()  # JSON null
    assert isinstance(frame.iloc[0]["metadata"], dict)
    missing, out = cells.run("%kbsql SELECT * FROM only_local")
    assert not missing.success and "only_local" in out
    # -c runs one cell elsewhere without switching
    assert cells.ok("%kbsql -c default SELECT * FROM only_local").shape[1] == 6
    assert not cells.run("%kbsql SELECT * FROM only_local")[0].success
    # switching back by alias
    cells.ok("%kbsql_connect default")
    assert cells.ok("%kbsql SELECT * FROM only_local").shape[1] == 6
    _, listing = cells.run("%kbsql_connect --list")
    assert "* default" in listing and "  remote" in listing and SECRET not in listing
    cells.ok("%kbsql_connect --close remote")
    result, out = cells.run("%kbsql -c remote SELECT 1")
    assert not result.success and "No connection named 'remote'" in out


def test_named_connections_from_config_and_user_info_masked(cells, server_url):
    cells.ok(f"%config KbSql.connections = {{'prod': '{server_url}'}}")
    assert cells.ok("%kbsql -c prod SELECT 1 AS a").shape == (1, 1)
    assert not _manager(cells).get("prod").client.is_embedded
    host = server_url.split("://", 1)[1]
    result, out = cells.run(f"%kbsql_connect http://me:{SECRET}@{host} --alias creds")
    assert result.success and SECRET not in out and "***@" in out


def test_key_from_a_named_env_var_or_a_prompt(cells, server_url, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_KEY", SECRET)
    cells.ok(f"%kbsql_connect {server_url} --alias a --api-key-env MY_SERVICE_KEY")
    assert _manager(cells).get("a").client.api._http.headers["Authorization"] == f"Bearer {SECRET}"
    result, out = cells.run(f"%kbsql_connect {server_url} --alias b --api-key-env NOT_SET_ANYWHERE")
    assert not result.success and "NOT_SET_ANYWHERE" in out
    prompts = []
    monkeypatch.setattr(getpass, "getpass", lambda prompt: prompts.append(prompt) or "typed-key")
    result, out = cells.run(f"%kbsql_connect {server_url} --alias c --ask-key")
    assert result.success and "typed-key" not in out and prompts
    assert _manager(cells).get("c").client.api._http.headers["Authorization"] == "Bearer typed-key"


def test_connections_close_on_unload(ip, server_url):
    ip.run_line_magic("kbsql_connect", f"{server_url} --alias remote")
    manager = next(c for c in ip.configurables if isinstance(c, KbSql)).manager
    http = manager.get("remote").client.api._http
    ip.extension_manager.unload_extension("kbsql")
    assert http.is_closed and manager.connections == {}
    ip.extension_manager.load_extension("kbsql")


@pytest.mark.parametrize("line", ["%kbsql_connect --close nothing", "%kbsql_connect nothing_known",
                                  "%kbsql -c nothing SELECT 1"])
def test_unknown_alias_is_a_short_error_and_creates_nothing(cells, line, tmp_path):
    result, out = cells.run(line)
    assert not result.success and "nothing" in out and "Traceback" not in out
    assert not (tmp_path / "nothing_known").exists()  # a typo never creates a data directory


@pytest.mark.parametrize("address", ["127.0.0.1:47334", "localhost:47334/", "kb.example.com:443",
                                     "[::1]:47334"])
def test_a_server_address_without_its_scheme_names_the_url_and_creates_nothing(
        cells, address, tmp_path, monkeypatch):
    """`%kbsql_connect 127.0.0.1:47334` advised "write ./127.0.0.1:47334" (a new embedded
    engine), and `kbsql.connect("127.0.0.1:47334")` made that folder and answered from an
    empty engine, no error. Both now name the URL; a directory of that name still opens."""
    import kbsql

    url = "http://" + address.rstrip("/")
    result, out = cells.run(f"%kbsql_connect {address}")
    assert not result.success and f"%kbsql_connect {url}" in out and "Traceback" not in out, out
    with pytest.raises(ValueError, match=re.escape(f"kbsql.connect('{url}')")):
        kbsql.connect(address)
    assert list(tmp_path.iterdir()) == []  # no folder named after the address
    (tmp_path / "10.0.0.1:80").mkdir()
    assert cells.run("%kbsql_connect 10.0.0.1:80")[0].success  # an existing directory is one
    kbsql.connect(data_dir="0.0.0.0:9").close()  # data_dir= is a directory, whatever its name
    assert (tmp_path / "0.0.0.0:9" / "catalog.sqlite").exists()


def test_an_address_that_serves_no_api_is_refused_not_connected(cells, server_url):
    """`%kbsql_connect URL/api` (README: "routes live under /api") printed "Connected" and
    every query then failed with "No route /api/api/sql/query"; so did any web server's
    address. A 404 for /api/projects now fails the line, naming the root URL when it ends
    in /api, and the connection is not kept."""
    result, out = cells.run(f"%kbsql_connect {server_url}/api -a wrong")
    assert not result.success and "Connected" not in out and "Traceback" not in out, out
    assert f"{server_url}/api names the server's /api: %kbsql_connect {server_url} (the client adds " \
           "/api itself)" in out, out
    result, out = cells.run(f"%kbsql_connect {server_url}/elsewhere/ -a wrong")
    assert not result.success and "give the address kbsql serve printed" in out, out
    assert "wrong" not in _manager(cells).connections
    assert "Connected" in cells.run(f"%kbsql_connect {server_url} -a right")[1]


def test_a_path_opens_an_embedded_engine_there(cells, tmp_path):
    result, out = cells.run("%kbsql_connect ./local-data")
    assert result.success and "local-data: embedded" in out
    assert (tmp_path / "local-data" / "catalog.sqlite").exists()


def test_default_connection_from_config_is_used_by_the_first_query(cells, tmp_path):
    cells.ok("%config KbSql.default_connection = './team-data'")
    cells.ok("%kbsql SELECT 1 AS a")
    conn = _manager(cells).get()
    assert conn.alias == "team-data"
    assert str(conn.client.api.data_dir) == str((tmp_path / "team-data").resolve())


def test_a_password_in_the_server_url_never_reaches_an_output(cells, server_url):
    """`user:password@` in a URL is masked in errors and reprs, the client's and the notebook's."""
    import socket

    with socket.socket() as s:  # a port nobody listens on: the query fails to connect
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result, out = cells.run(f"%kbsql_connect http://alice:pw-0123@127.0.0.1:{port} --alias down")
    assert "pw-0123" not in out
    assert "Not answering: down: " in out and "Cannot reach" in out  # asked when made: said at once
    assert "Connected" not in out  # it said "Connected: down: ... (not answering now (...))"
    result, out = cells.run("%kbsql SELECT 1")
    assert not result.success and "Cannot reach" in out and "***@127.0.0.1" in out
    assert "pw-0123" not in out
    client = _manager(cells).get("down").client
    assert "pw-0123" not in repr(client) and "pw-0123" not in repr(client.api)
    assert "***@127.0.0.1" in repr(client)
    # a real server reached through a URL with credentials still works, and still masks them
    live = server_url.replace("http://", "http://bob:pw-4567@")
    result, out = cells.run(f"%kbsql_connect {live} --alias up")
    assert result.success, out
    assert cells.ok("%kbsql SELECT 7 AS n").iloc[0]["n"] == 7
    _, listing = cells.run("%kbsql_connect --list")
    assert "pw-4567" not in listing and "pw-4567" not in repr(_manager(cells).get("up").client)


def test_a_server_url_ending_in_api_names_the_server_s_address():
    """`kbsql.connect("http://127.0.0.1:47334/api")` (README: "routes live under /api") was
    accepted, and every request then answered "No route /api/api/sql/query"."""
    import kbsql

    for url in ("http://127.0.0.1:47334/api", "https://kb.example.com/team/api/"):
        with pytest.raises(ValueError, match=re.escape(f"kbsql.connect('{re.sub('/api/?$', '', url)}')")):
            kbsql.connect(url)
    kbsql.connect("http://127.0.0.1:9/apis").close()  # a path that only starts so is the user's


def test_credentials_in_a_mistyped_address_are_never_shown_back(cells, tmp_path):
    """`kbsql.connect("http://bob:pw-8910@host:47334/api")` raised a ValueError quoting the
    password (masked in every other error and repr); `kbsql.connect("bob:pw-8910@host:47334")`
    (no http://) made a data directory named with the password and answered from an empty
    engine, no error, and `%kbsql_connect bob:pw-8910@host:47334` printed it back in
    "write ./bob:pw-8910@...". Each now names the URL meant with its credentials masked."""
    import kbsql

    with pytest.raises(ValueError) as with_api:
        kbsql.connect("http://bob:pw-8910@127.0.0.1:47334/api")
    assert "pw-8910" not in str(with_api.value) and "kbsql.connect('http://***@127.0.0.1:47334')" in str(
        with_api.value)
    for address in ("bob:pw-8910@127.0.0.1:47334", "bob@localhost:47334/"):
        with pytest.raises(ValueError) as no_scheme:
            kbsql.connect(address)
        said = str(no_scheme.value)
        assert "pw-8910" not in said and "bob" not in said and "kbsql.connect('http://***@" in said, said
        result, out = cells.run(f"%kbsql_connect {address}")
        assert not result.success and "%kbsql_connect http://***@" in out and "Traceback" not in out, out
        assert "pw-8910" not in out and "bob" not in out, out
    assert list(tmp_path.iterdir()) == []  # no folder named after the address


@pytest.mark.parametrize("option", ["--api-key", "--token", "--api", "--token=", "--key"])
def test_a_key_typed_on_the_connect_line_is_never_shown_back(cells, option):
    """`%kbsql_connect URL --api-key sk-...` (or `--token`, kbsql.connect's word) was read as an
    abbreviation of --api-key-env / --token-env, and the key came back in the cell's output:
    "The environment variable sk-... is not set". Such an option is refused naming the ways a
    key is given, and a value given where a variable's name goes is not shown either."""
    sep = "" if option.endswith("=") else " "
    result, out = cells.run(f"%kbsql_connect http://127.0.0.1:9 {option}{sep}sk-pw-5566778899")
    assert not result.success and "5566778899" not in out, out
    assert "--token-env VAR" in out and "--ask-key" in out, out
    result, out = cells.run("%kbsql_connect http://127.0.0.1:9 --token-env sk-pw-5566778899")
    assert not result.success and "5566778899" not in out and "not set" in out, out
    result, out = cells.run("%kbsql_connect http://127.0.0.1:9 --token-env KBSQL_NO_SUCH_VAR_9")
    assert "The environment variable KBSQL_NO_SUCH_VAR_9 is not set" in out, out  # a name is named


def test_a_data_directory_whose_config_json_is_wrong_is_one_line(cells, tmp_path):
    """`%kbsql_connect DIR` (or the first %kbsql on the default engine) over a config.json with
    a stray comma or a misspelt key showed a 40-line traceback ending in json's
    'JSONDecodeError: Expecting property name ...', which named no file, or in SettingError."""
    for name, text, says in (
            ("comma", '{"max_variables": 5,}', "config.json in {} is not valid JSON: Expecting property "
                                               "name enclosed in double quotes: line 1 column 21"),
            ("typo", '{"max_variabels": 5}', "config.json in {}: unknown setting 'max_variabels' "
                                             "(did you mean 'max_variables'?)")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(text)
        result, out = cells.run(f"%kbsql_connect ./{name}")
        assert not result.success and "Traceback" not in out, out
        assert says.format(tmp_path / name) in out, out
    cells.ok(f"%config KbSql.default_connection = './{name}'")
    result, out = cells.run("%kbsql SELECT 1 AS a")  # the default engine, opened by the first query
    assert not result.success and "Traceback" not in out and "unknown setting 'max_variabels'" in out, out
