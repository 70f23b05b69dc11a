"""sweep.services refuses a folder that already holds a cluster, before touching anything."""

from __future__ import annotations

import pytest

from sweep.services import stores as services


def existing_cluster(tmp_path):
    (tmp_path / "postgres").mkdir()
    (tmp_path / "postgres" / "PG_VERSION").write_text("15\n")


def test_an_existing_cluster_keeps_its_pgpass(tmp_path):
    existing_cluster(tmp_path)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text("127.0.0.1:5432:*:specsweep:the-old-password\n")
    with pytest.raises(RuntimeError, match="postgres exists: stop and remove it"):
        services.start_postgres(tmp_path, services.free_port())
    assert pgpass.read_text() == "127.0.0.1:5432:*:specsweep:the-old-password\n"


def test_a_refused_start_writes_nothing(tmp_path):
    existing_cluster(tmp_path)
    with pytest.raises(RuntimeError, match="use another --dir"):
        services.start_postgres(tmp_path, services.free_port())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["postgres"]
    assert [p.name for p in (tmp_path / "postgres").iterdir()] == ["PG_VERSION"]
