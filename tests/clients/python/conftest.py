"""Fixtures of the Python client's tests: one real `airlock serve` per module (started the way
tests/e2e does it, see tests/e2e/airlock_daemon.py), and the client imported from the source
tree (clients/python); test_client.py also proves that pip installs it offline."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CLIENT_SRC = ROOT / "clients" / "python"
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(CLIENT_SRC))

from airlock_daemon import daemon_fixture  # noqa: E402

daemon = daemon_fixture(pytest)


@pytest.fixture
def client_env(daemon, monkeypatch):
    """AIRLOCK_URL and AIRLOCK_TOKEN of the test daemon, as a user would export them."""
    monkeypatch.setenv("AIRLOCK_URL", daemon.url)
    monkeypatch.setenv("AIRLOCK_TOKEN", daemon.token)
    return {"AIRLOCK_URL": daemon.url, "AIRLOCK_TOKEN": daemon.token}


@pytest.fixture
def sandboxes(client_env):
    """Sandboxes a test makes with .new(...); every one still alive is deleted afterwards,
    whatever happened."""
    import airlock

    made = []

    class Maker:
        def new(self, **kw):
            sb = airlock.Sandbox(**kw)
            made.append(sb)
            return sb

        def track(self, sbs):
            made.extend(sbs)
            return sbs

    yield Maker()
    for sb in made:
        try:
            sb.delete()
        except airlock.NotFoundError:
            pass

