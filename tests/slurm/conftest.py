"""A real single-node SLURM cluster for the session: `sweep.services.slurm`, what users run.

It installs Debian's Slurm and MUNGE with apt-get when they are missing (CI is a fresh Debian
machine, as root), starts munged, slurmctld and slurmd from a folder of their own, and stops
them, with every job they still hold, when the session ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from sweep.services import slurm as slurm_cluster


@pytest.fixture(scope="session")
def slurm():
    # Under /tmp itself: munged wants every folder above its socket searchable by all.
    root = Path(tempfile.mkdtemp(prefix="specsweep-slurm-"))
    saved = os.environ.get("SLURM_CONF")
    try:
        started = time.monotonic()
        cluster = slurm_cluster.start(root)
        print(f"\nSLURM cluster in {root}: idle after {time.monotonic() - started:.1f} s")
        # sbatch exports the submitting shell's environment: the jobs' srun finds it too
        os.environ.update(cluster.env)
        yield cluster
    finally:
        slurm_cluster.stop(root)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(root, ignore_errors=True)
