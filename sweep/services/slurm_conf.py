"""What the single-node SLURM cluster is made of: its packages, its node, its slurm.conf.

`sweep.services.slurm` starts and stops the cluster; this holds what it installs (Debian's Slurm
22.05 and MUNGE, with apt-get when a program is missing), what it reads from the machine
(`slurmd -C`: CPUs, sockets, cores, threads, memory) and the slurm.conf it writes, each setting
with its reason. The GPU slots are a generic GRES, `GRES`: a GRES named `gpu` without device
files registers 0 on the node, and slurmctld sets it INVAL/DRAIN ("gres/gpu count reported lower
than configured (0 < 2)"); a GRES with another name and a plain Count registers as configured.
SLURM then sets no CUDA_VISIBLE_DEVICES for it, so workers take their GPUs through the node's
lock files (sweep.launch.slots).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurm-wlm", "slurmctld", "slurmd", "munge")
# what start() runs or asks; the packages above provide them (slurm-client the user commands)
DAEMON_PROGRAMS = ("munged", "munge", "slurmctld", "slurmd")
PROGRAMS = (*DAEMON_PROGRAMS, "sinfo", "scontrol", "squeue", "scancel", "sbatch", "srun")
PARTITION = "specsweep"
# The GPU slots' GRES. Not `gpu`: SLURM counts a `gpu` GRES from its device files (File=), and
# with none the node registers 0 of them and is set INVAL. Any other name with a Count works.
GRES = "gpuslot"
# How long a requeued job waits before it starts again (AuthInfo cred_expire; SLURM's default
# is 120 s). A job that submitit requeues at its time-limit signal waits this long.
CRED_EXPIRE_S = 10
SCHED_INTERVAL_S = 2  # between scheduling passes (SLURM's defaults: 30 s backfill, 60 s main)
KILL_WAIT_S = 30  # SIGTERM -> SIGKILL for a cancelled or timed-out job: a worker stops its servers


class ClusterError(RuntimeError):
    """The cluster could not be installed, started or stopped; the message names the fix."""


@dataclass(frozen=True)
class Cluster:
    root: str
    node: str
    partition: str
    gpu_slots: int
    gres: str  # the GRES name the GPU slots go by (GRES)
    cpus: int
    memory_mb: int
    ctld_port: int
    slurmd_port: int

    @property
    def gres_count(self) -> str:
        return f"{self.gres}:{self.gpu_slots}"

    @property
    def conf(self) -> Path:
        return Path(self.root) / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a shell (or a test) needs to reach this cluster's slurmctld."""
        return {"SLURM_CONF": str(self.conf)}

    def exports(self) -> str:
        return "".join(f"export {k}={v}\n" for k, v in self.env.items())


def ensure_installed() -> None:
    """Debian's Slurm and MUNGE, installed with apt-get when a program is missing."""
    if not _missing():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise ClusterError(
            f"SLURM is not installed ({', '.join(_missing())} missing): "
            f"sudo apt-get install -y {' '.join(PACKAGES)}"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    install = ["apt-get", "install", "-y", "-q", *PACKAGES]
    subprocess.run(install, check=True, env=env, stdout=subprocess.DEVNULL)
    if _missing():
        raise ClusterError(f"apt-get installed {' '.join(PACKAGES)} but {_missing()} are missing")


# the daemons live in /usr/sbin, which a user's PATH may lack (Debian puts it on root's)
_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])


def _missing() -> list[str]:
    return [p for p in PROGRAMS if not shutil.which(p, path=_PATH)]


def program(name: str) -> str:
    """The path of a Slurm or MUNGE program; the error names the packages to install."""
    found = shutil.which(name, path=_PATH)
    if found is None:
        raise ClusterError(f"{name} is not installed: sudo apt-get install -y {' '.join(PACKAGES)}")
    return found


def node_hardware() -> dict[str, str]:
    """This machine as slurmd sees it (`slurmd -C`): CPUs, boards, sockets, cores, threads and
    RealMemory. Configuring exactly that keeps the node from registering as misconfigured."""
    out = subprocess.run(
        [program("slurmd"), "-C"], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
    fields = dict(part.split("=", 1) for part in line.split())
    fields.pop("NodeName")
    return fields


def default_gpu_slots() -> int:
    """This machine's NVIDIA GPUs, or 2 where it has none (the simulator's GPUs: two single-GPU
    workers side by side)."""
    found = [d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()]
    return len(found) or 2


def slurm_conf(root: Path, cluster: Cluster, hardware: dict[str, str]) -> str:
    """slurm.conf for one node on loopback, everything in `root`, no accounting storage."""
    node = " ".join(f"{k}={v}" for k, v in [*hardware.items(), ("Gres", cluster.gres_count)])
    return f"""\
# Generated by `python -m sweep.services slurm start --dir {root}`: a single-node cluster
# on loopback for specsweep's SLURM launcher (docs/scale-out.md). Regenerated on every start.
ClusterName=specsweep
SlurmctldHost={cluster.node}(127.0.0.1)
SlurmctldPort={cluster.ctld_port}
SlurmdPort={cluster.slurmd_port}
# root: slurmd starts jobs as their users, and this cluster has no slurm user of its own
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# our own munged (DIR/munge); cred_expire is also how long a requeued job waits to restart
AuthInfo=socket={root}/munge/munge.socket,cred_expire={CRED_EXPIRE_S}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
# no cgroups (a container may not let slurmd create them): processes are tracked by parentage
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# no slurmdbd: sacct does not answer; scontrol and squeue do
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# a job that asks for no memory gets this per CPU, not the whole node
DefMemPerCPU=512
SchedulerType=sched/backfill
# every {SCHED_INTERVAL_S} s, not 30/60: nothing else wakes the scheduler when a requeued job's
# BeginTime (cred_expire) passes, and it waited up to a minute more for the next pass
SchedulerParameters=bf_interval={SCHED_INTERVAL_S},sched_interval={SCHED_INTERVAL_S}
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
KillWait={KILL_WAIT_S}
GresTypes={cluster.gres}
NodeName={cluster.node} NodeAddr=127.0.0.1 {node} State=UNKNOWN
PartitionName={cluster.partition} Nodes={cluster.node} Default=YES MaxTime=INFINITE State=UP
"""
