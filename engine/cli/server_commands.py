"""`memwb ui`, `auth` and `llm`: the workbench server, its users and the local model server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from engine.cli.session_commands import open_db
from engine.core.access import Role


def cmd_ui(args) -> int:
    from engine import serve
    from engine.core.access import SIGN_IN_ENV, is_loopback
    from engine.store.catalog import DB_ENV, read_session
    from engine.store.data_paths import DATA_DIRS_ENV

    root = Path(__file__).resolve().parents[2]
    app = root / "workbench" / "app.py"
    loopback = is_loopback(args.host)
    cmd = [sys.executable, "-m", "streamlit", "run", str(app), "--server.port", str(args.port),
           "--server.address", args.host, "--browser.gatherUsageStats", "false",
           "--server.enableXsrfProtection", "true", "--server.enableCORS", "true", *serve.unwatched_library(root)]
    if loopback:       # a web page elsewhere cannot reach it through DNS rebinding
        for host in serve.loopback_hosts(args.host):
            cmd += ["--server.allowedHosts", host]
    else:              # tracebacks stay in the server's log, not in a remote browser
        cmd += ["--client.showErrorDetails", "type"]
    if args.headless:
        cmd += ["--server.headless", "true"]
    env = dict(os.environ)
    if args.db:
        db = Path(args.db).expanduser().resolve()
        problem = "no such file" if not db.is_file() else read_session(db).problem
        if problem:
            print(f"memwb ui: error: cannot open {db}: {problem}", file=sys.stderr)
            return 2
        env[DB_ENV] = str(db)
    if args.data_dir:
        dirs = [str(Path(d).expanduser().resolve()) for d in args.data_dir]
        env[DATA_DIRS_ENV] = os.pathsep.join(x for x in (env.get(DATA_DIRS_ENV, ""), *dirs) if x)
    if args.sign_in or not loopback:
        sign_in = serve.sign_in_methods(app)
        if not sign_in.any:
            print(f"memwb ui: error: {sign_in.missing_text(args.host)}", file=sys.stderr)
            return 2
        env[SIGN_IN_ENV] = "1"
        if not loopback:
            print(f"memwb ui: warning: {serve.exposure_text(args.host, args.port, sign_in)}", file=sys.stderr)
    return serve.run_server(cmd, env)


def cmd_auth(args) -> int:
    from engine.store.users import UserBook

    book = UserBook()
    if args.action == "list":
        users = book.users()
        for user in users.values():
            print(f"{user.name}  {user.role.value}  {'identity provider' if user.oidc else 'token'}")
        if not users:
            print(f"no users in {book.path}")
        return 0
    if args.action == "role":
        book.set_role(args.name, Role(args.role))
        print(f"{args.name}: now a {args.role}", file=sys.stderr)
        return 0
    if args.action == "remove":
        book.remove(args.name)
        print(f"{args.name}: removed; their browser sessions are signed out", file=sys.stderr)
        return 0
    password = _typed_password() if args.password else None
    if args.action == "add":
        secret = book.add(args.name, Role(args.role), oidc=args.oidc, password=password)
        said = f"{args.name}: added as a {args.role}"
    else:
        secret = book.rotate(args.name, password)
        said = f"{args.name}: new secret; the old one no longer signs in"
    if secret is None:
        print(f"{said}; signs in through the identity provider ([auth] in Streamlit's secrets)", file=sys.stderr)
    elif password is None:
        print(secret)
        print(f"{said}. The token above is shown only now (only its hash is kept in {book.path}): hand it over "
              "privately.", file=sys.stderr)
    else:
        print(f"{said} with the password typed.", file=sys.stderr)
    return 0


def _typed_password() -> str:
    """A password from the terminal (asked twice), or one line of standard input when it is not a terminal."""
    import getpass

    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ; nothing was changed")
    return first


def cmd_llm(args) -> int:
    from engine.llm import server

    if args.llm_command == "install":
        script = Path(__file__).resolve().parents[2] / "scripts" / "install_llm.sh"
        env = {**os.environ, "MEMWB_VENV": os.environ.get("MEMWB_VENV") or str(Path(sys.executable).parents[1])}
        return subprocess.call(["bash", str(script)], env=env)
    if args.llm_command == "where":
        print(server.model_path())
        return 0
    if args.llm_command == "serve":
        return server.serve(args.port, args.ctx, args.threads, Path(args.log) if args.log else None,
                            announce=lambda line: print(line, flush=True))
    from engine.eval.llm_costs import cost_table, decisions_line, session_costs_and_decisions

    costs, decided = session_costs_and_decisions(open_db(args, warn=False), compare=args.compare)
    if args.json:
        print(json.dumps({**costs, **({"decisions": decided} if decided else {})}, indent=1))
    else:
        print(cost_table(costs) + (f"\n\n{decisions_line(decided)}" if decided else ""))
    return 0
