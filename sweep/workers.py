"""`worker.count=N`: the Hydra launcher places N sweep workers, e.g. one per SLURM node.

Each Hydra job here is a whole worker, not a trial: the job runs `python sweep.py -m` with the
same overrides on the node the launcher put it on (`worker.count=1` there, so it sweeps instead
of launching more workers). The workers share the study through `tracking=server`; each one
runs its node's GPU slots. The launcher (hydra-submitit-launcher's `submitit_slurm`, or
`submitit_local` to try it on one machine) decides where they run; this module only asks it to.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sweep.console import console

ROOT = Path(__file__).resolve().parent.parent
_OWN_KEYS = ("trial.", "worker.count")


def launch_workers(sweeper: Any, arguments: list[str]) -> list[int]:
    cfg = sweeper.config
    target = str(cfg.hydra.launcher.get("_target_", ""))
    if target.endswith("BasicLauncher"):
        console.print(
            f"[red]error:[/red] worker.count={cfg.worker.count} needs a launcher that runs jobs "
            "side by side, e.g. hydra/launcher=slurm (submitit, one worker per node) or "
            "submitit_local; to share a study from several shells, start `python sweep.py -m` "
            "in each instead (docs/scale-out.md)."
        )
        raise SystemExit(2)
    kept = [a for a in arguments if not a.lstrip("+~").startswith(_OWN_KEYS)]
    jobs = [[*kept, f"trial.name=worker_{i}", "trial.role=worker"] for i in range(cfg.worker.count)]
    console.print(f"starting {len(jobs)} sweep workers through {target.rsplit('.', 1)[-1]}")
    returns = sweeper.launcher.launch(jobs, initial_job_idx=0)
    codes = [int(r.return_value) for r in returns]
    for i, code in enumerate(codes):
        console.print(f"worker_{i}: " + ("finished" if code == 0 else f"exit code {code}"))
    if any(codes):
        raise SystemExit(1)
    return codes


def run_worker(cfg: DictConfig) -> int:
    """Inside the launched job, on its node: one `python sweep.py -m` with the same overrides."""
    overrides = [
        o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(_OWN_KEYS)
    ]
    folder = Path(HydraConfig.get().runtime.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(ROOT / "sweep.py"), "-m", *overrides, "worker.count=1"]
    with (folder / "worker.log").open("ab") as out:
        return subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
