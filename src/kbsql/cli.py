"""`kbsql` command line: `kbsql serve` runs the HTTP server, `kbsql quickstart` a demo."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kbsql", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the local engine over HTTP (MindsDB-compatible API)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=47334, help="port (default 47334; 0 picks one)")
    serve.add_argument("--data-dir", default=None, help="data directory (default $KBSQL_HOME or ./.kbsql)")
    serve.add_argument("--catalog", default=None, metavar="URL",
                       help="postgresql:// URL of a catalog shared by several servers (default "
                            "$KBSQL_CATALOG_URL, else catalog.sqlite in the data directory); "
                            "prefer the variable: a password in argv is visible to other users")
    serve.add_argument("--log-level", default="warning")
    serve.add_argument("--allow-origin", action="append", default=[], metavar="URL",
                       help="a browser origin (scheme://host:port) allowed to call the server "
                            "besides loopback ones; repeatable")
    quick = sub.add_parser("quickstart", help="build a small knowledge base and agent, query them")
    quick.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from kbsql.server.run import serve as run_server

        run_server(args.host, args.port, args.data_dir, args.log_level, tuple(args.allow_origin),
                   catalog_url=args.catalog)
        return 0
    from kbsql.quickstart import run

    return run(args.data_dir)


if __name__ == "__main__":
    sys.exit(main())
