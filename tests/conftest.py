# The tests run with the backend a program gets (dflash/backend.py), chosen before any test
# module imports mlx.
from dflash import backend

backend.setup()

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_cost_store(tmp_path_factory, monkeypatch):
    """Each test times its own passes (or mocks them): no cost table stored by an earlier test,
    run or session is read back (engine._costs keeps them on disk per host and models)."""
    from dflash import engine

    folder = tmp_path_factory.mktemp("costs")
    monkeypatch.setattr(engine, "_costs_dir", lambda: folder)
