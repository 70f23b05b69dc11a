"""Preflight's write probe of the results folder, which every worker of a sweep runs at once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from sweep.preflight.stores import write_probe

PROBES = 300


def _probe_many(folder: str) -> int:
    """How many of PROBES probes of `folder` failed."""
    failed = 0
    for _ in range(PROBES):
        try:
            write_probe(Path(folder))
        except OSError:
            failed += 1
    return failed


def test_workers_probing_one_folder_at_once_all_pass(tmp_path):
    """SLURM starts a sweep's workers together and each checks the shared results folder; with
    one probe name for all, a worker removed another's probe first and that worker's preflight
    failed with "No such file or directory" (10-25% of the probes, four processes here)."""
    with multiprocessing.get_context("fork").Pool(4) as pool:
        failed = pool.map(_probe_many, [str(tmp_path)] * 4)
    assert failed == [0, 0, 0, 0]
    assert list(tmp_path.iterdir()) == []  # every probe removed


def test_a_folder_that_cannot_be_written_raises(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(OSError):
        write_probe(blocker)
