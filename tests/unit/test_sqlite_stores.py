"""A local sweep's sqlite stores are opened in write-ahead-log mode (sweep.tracking.sqlite_wal),
the mode the file keeps, and the stores work in it: Optuna's study and its attributes, read back
by a second connection."""

from __future__ import annotations

import sqlite3

import optuna

from sweep.tracking.sqlite_wal import write_ahead_log


def _mode(path) -> str:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA journal_mode").fetchone()[0]


def test_a_local_store_is_put_in_write_ahead_log_mode_and_keeps_working(tmp_path):
    path = tmp_path / "optuna.db"
    uri = f"sqlite:///{path}"
    write_ahead_log(uri)
    assert _mode(path) == "wal"
    study = optuna.create_study(storage=uri, study_name="s")
    trial = study.ask()
    trial.set_user_attr("outcome", "ok")
    study.tell(trial, 1.0)
    again = optuna.load_study(study_name="s", storage=uri)  # another connection reads it
    assert again.trials[0].user_attrs == {"outcome": "ok"}
    assert _mode(path) == "wal"


def test_a_store_held_locked_or_not_sqlite_is_left_as_it_is(tmp_path):
    path = tmp_path / "mlflow.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    write_ahead_log(f"sqlite:///{path}")  # waits a second, then leaves it
    holder.execute("ROLLBACK")
    holder.close()
    assert _mode(path) == "delete"
    write_ahead_log("postgresql+psycopg2://specsweep@127.0.0.1:5432/optuna")  # nothing to do
