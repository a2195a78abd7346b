"""Every test gets its own recall home, so nothing touches the user's real one."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("recall-home")
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    for var in ("DSH_RECALL_CONFIG", "DSH_HOME"):
        monkeypatch.delenv(var, raising=False)
    return home
