"""A real PostgreSQL server and a real MLflow tracking server on loopback, for the whole session.

`sweep.services` installs PostgreSQL with apt-get when its binaries are missing (CI is a fresh
Debian machine), then starts a throwaway cluster and `mlflow server` on it: what users run.
tests/conftest.py offers it to every tier, so scaleout/ and slurm/ share one instance.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from sweep.services import stores as services


@pytest.fixture(scope="session")
def tracking_services():
    # Under /tmp itself: pytest's tmp folders are private to root, and PostgreSQL runs as the
    # postgres user when the tests run as root.
    root = Path(tempfile.mkdtemp(prefix="specsweep-services-"))
    try:
        started = services.start(root)
        saved = {k: os.environ.get(k) for k in started.env}
        os.environ.update(started.env)  # libpq in this process reads PGPASSFILE too
        yield started
    finally:
        services.stop(root)
        for key, value in locals().get("saved", {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(root, ignore_errors=True)
