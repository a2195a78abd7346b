"""Every test gets its own recall home, so nothing touches the user's real one."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("recall-home")
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    for var in ("DSH_RECALL_CONFIG", "DSH_HOME"):
        monkeypatch.delenv(var, raising=False)
    # No test's CLI call starts a background daemon unless it asks to (tests/test_warm_*.py);
    # one a from-scratch environment started is stopped below.
    monkeypatch.setenv("DSH_RECALL_DAEMON", "manual")
    return home


@pytest.fixture(autouse=True)
def _no_daemon_left(tmp_path_factory):
    yield
    from warm_sweep import stop_daemons

    stop_daemons(tmp_path_factory.getbasetemp())
