"""Shared fixtures: a real embedder, real databases (SQLite files, PostgreSQL databases), hand-written turns.

Databases. `db_url` is a fresh, empty database for one test and `make_db()` makes
more of them (a branch target, a second session); both are URLs that `--db`,
`open_session` and `Store` accept, on the test's `backend`:

- ``sqlite``: a file in the test's tmp_path (``sqlite:////…/mem0.sqlite``);
- ``postgresql``: a database with a unique name created on the server named by
  ``MEMWB_TEST_PG_URL`` (a URL of a database on it, e.g. ``postgresql://postgres@127.0.0.1:5433/postgres``;
  `scripts/test.sh` starts a throwaway server and sets it) and dropped when the fixture ends, open
  connections and all. Without ``MEMWB_TEST_PG_URL`` these cases are skipped, except under ``CI=true``
  where they fail.

`backend` is ``sqlite`` unless a module runs its tests on both by overriding it::

    @pytest.fixture(scope="module", params=BACKENDS)
    def backend(request):
        return request.param

Then every test of that module that uses `db_url`, `make_db` or `make_engine` runs once per backend
(ids ``[sqlite]`` and ``[postgresql]``); `make_db("sqlite")` gives a database on another backend than
the test's. A module-scoped fixture gets its databases from `fresh_databases(backend, folder)`.

Shared data. A test that reads LoCoMo or QMSum (`../shared/data`, or `MEMWB_SHARED_DATA`) gets the path through
`needs_data(path)` (or asks `has_data(path)` for one case among others): missing, it is skipped, and under CI
it fails (`unavailable`, as a missing PostgreSQL server does), so a CI run without the data cannot go green.
"""
from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")      # "gw0", "gw1", … under `pytest -n N`; else ""
if "MEMWB_WORKSPACE" not in os.environ or XDIST_WORKER:
    # never the user's own workspace: one throwaway folder per test run, and per worker when the suite runs on
    # several (a test that lists the workspace's sessions must see only its own worker's)
    import tempfile
    os.environ["MEMWB_WORKSPACE"] = tempfile.mkdtemp(prefix=f"memwb-test-workspace-{XDIST_WORKER}")

from engine.core.conversation import Turn  # noqa: E402
from engine.session import open_session  # noqa: E402
from engine.store.data_paths import shared_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = shared_data()           # ../shared/data, or MEMWB_SHARED_DATA
LOCOMO = SHARED_DATA / "locomo" / "locomo-dev8.json"


def engines_under_test() -> list[str]:
    """The engines the per-engine tests run for: every usable one (built-in and installed plugins), or the ones
    `MEMWB_CONTRACT_ENGINES` names (what `memwb engine check NAME` sets; engine/eval/contract.py)."""
    from engine.engines import known_engines
    from engine.eval.contract import CONTRACT_ENGINES_VAR

    chosen = [n.strip() for n in os.environ.get(CONTRACT_ENGINES_VAR, "").split(",") if n.strip()]
    return chosen or known_engines()


def turn(i: int, speaker: str, text: str, session: str = "1", day: int = 1) -> Turn:
    """A hand-written turn; time grows with `day` and `i` so order is unambiguous."""
    return Turn(id=f"D{session}:{i}", speaker=speaker, text=text, time=f"2024-01-{day:02d}T10:{i:02d}:00",
                session=session, index=i)


BACKENDS = ("sqlite", "postgresql")
PG_URL_VAR = "MEMWB_TEST_PG_URL"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `-n N --dist loadfile` (scripts/test.sh): whole modules, longest first (tests/scheduling.py)."""
    if config.getoption("dist") in ("loadfile", "loadscope"):
        from tests.scheduling import LongestFirst

        return LongestFirst(config, log)
    return None


@pytest.fixture(autouse=True, scope="session")
def _pages_served_on_loopback():
    """Pages under AppTest run as `memwb ui` serves them by default, bound to loopback: the local user is signed
    in (workbench.access). A test of sign-in sets the address or MEMWB_SIGN_IN itself."""
    from streamlit import config

    config.set_option("server.address", "127.0.0.1")


@pytest.fixture(scope="session")
def backend() -> str:
    """The database backend of a test; a module overrides this fixture to run on every one (see above)."""
    return "sqlite"


@contextmanager
def fresh_databases(backend: str, folder: Path) -> Iterator[Callable[..., str]]:
    """`new(backend=None)` -> the URL of a fresh empty database; PostgreSQL ones are dropped on exit."""
    counter = itertools.count()
    made: list[str] = []

    def new(on: str | None = None) -> str:
        on = on or backend
        if on == "sqlite":
            return f"sqlite:///{folder / f'mem{next(counter)}.sqlite'}"
        if on != "postgresql":
            raise ValueError(f"unknown backend {on!r}; use one of {', '.join(BACKENDS)}")
        name = f"memwb_test_{uuid.uuid4().hex[:16]}"
        with _pg_admin() as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return _pg_url(name)

    try:
        yield new
    finally:
        if made:
            with _pg_admin() as admin:
                for name in made:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_server_url() -> str:
    url = os.environ.get(PG_URL_VAR)
    if not url:
        unavailable(f"{PG_URL_VAR} is not set: no PostgreSQL server for the postgresql cases "
                    "(scripts/test.sh starts one; or `eval \"$(bash scripts/pg_test_server.sh start)\"`)")
    return url


def _pg_url(database: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(_pg_server_url()).set(database=database).render_as_string(hide_password=False)


@contextmanager
def _pg_admin():
    import psycopg

    with psycopg.connect(_pg_server_url(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def make_db(backend, tmp_path) -> Iterator[Callable[..., str]]:
    """`make_db(backend=None)` -> the URL of a fresh empty database on the test's backend (or the one named)."""
    with fresh_databases(backend, tmp_path) as new:
        yield new


@pytest.fixture
def db_url(make_db) -> str:
    """A fresh empty database for this test on its backend, as a URL (`--db`, `open_session`, `Store`)."""
    return make_db()


@pytest.fixture
def make_engine(make_db):
    """Build an All-Mem engine on a fresh database of the test's backend; settings and LLM overridable."""

    def build(settings: dict | None = None, llm: str | None = None, **kw):
        return open_session(make_db(), settings=settings, llm=llm, **kw)

    return build


def under_ci() -> bool:
    """CI is set (to anything but empty, 0, false or no), as CI services set it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(message: str) -> NoReturn:
    """A test needs something outside the repository (a PostgreSQL server, the shared data) that is missing: it is
    skipped on a developer's machine, and fails under CI, so a CI run without it cannot go green."""
    if under_ci():
        pytest.fail(f"{message}; under CI it must be there", pytrace=False)
    pytest.skip(message)


def _data_missing(path: Path) -> str:
    return f"shared data not found at {path} (../shared/data beside the checkout, or MEMWB_SHARED_DATA)"


def needs_data(path: Path) -> Path:
    """`path` in the shared data (LoCoMo, QMSum), for a test that needs it: skipped when it is missing, failed
    under CI."""
    if not path.exists():
        unavailable(_data_missing(path))
    return path


def has_data(path: Path) -> bool:
    """Whether `path` is in the shared data, for a test that checks it as one case among others: missing, the
    case is left out, and under CI the test fails."""
    if not path.exists() and under_ci():
        pytest.fail(_data_missing(path) + "; under CI it must be there", pytrace=False)
    return path.exists()
