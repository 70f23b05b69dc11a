"""`python -m sweep.services slurm start|stop --dir DIR`: a single-node SLURM cluster in DIR.

The SLURM launcher (`hydra/launcher=slurm_local`, docs/scale-out.md) needs a real cluster to be
tried and tested against. This starts one on this machine, as `sweep.services` starts
PostgreSQL: Debian's Slurm 22.05 and MUNGE are installed when missing, and everything the
daemons write (munge key and socket, slurm.conf, state, spool, logs, pid files) lives in DIR.
One node, this host's `hostname -s`, on loopback, configured as `sweep.services.slurm_conf`
says. The
daemons run as root (slurmd starts jobs as their users; nothing else here needs more).
DIR/slurm.env sets SLURM_CONF for sinfo, sbatch, squeue and the launcher.

What trying it here showed (docs/scale-out.md, "A real single-node SLURM cluster"):
- munged runs as root from DIR if DIR/munge is searchable by all (it refuses otherwise);
  Slurm finds it through AuthInfo=socket=..., so no system-wide munge is touched.
- There is no accounting storage: `sacct` answers "Slurm accounting storage is disabled".
  `scontrol show job` and `squeue` read job state from slurmctld (sweep.launch.slurm_jobs).
- proctrack/linuxproc tracks a step's processes by parentage: a process that double-forks away
  from its step outlives the job (and keeps the step COMPLETING while it holds its output).
  Workers keep their servers as children, so none leave.
- slurmstepd outlives slurmd: stop() cancels the jobs and waits for their steps first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from harness.server.procs import free_port, pid_alive, wait_until
from sweep.services.slurm_conf import (
    GRES,
    PARTITION,
    Cluster,
    ClusterError,
    default_gpu_slots,
    ensure_installed,
    node_hardware,
    program,
    slurm_conf,
)

DAEMONS = ("munged", "slurmctld", "slurmd")  # started in this order, stopped in reverse
START_DEADLINE_S = 60.0
STOP_DEADLINE_S = 60.0


def start(
    root: Path,
    gpu_slots: int | None = None,
    deadline_s: float = START_DEADLINE_S,
    gres: str = GRES,
) -> Cluster:
    """Install when missing, write the config, start munged, slurmctld and slurmd, and return
    once the node is idle. A cluster already running in `root` as asked is returned as it is.
    `gres` other than GRES is for showing why GRES is what it is (tests/slurm)."""
    root = root.resolve()
    current = running(root)
    if current is not None and gpu_slots in (None, current.gpu_slots) and gres == current.gres:
        return current
    if os.geteuid() != 0:
        raise ClusterError(
            "slurmd starts jobs as their users and must run as root: "
            f"sudo {sys.executable} -m sweep.services slurm start --dir {root}"
        )
    ensure_installed()
    stop(root)  # whatever a start that did not finish, or another slot count, left behind
    for sub in ("munge", "state", "spool", "log", "run"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    # munged refuses a socket in a folder that not everyone can search
    for path in (root, root / "munge"):
        os.chmod(path, 0o755)
    hardware = node_hardware()
    cluster = Cluster(
        root=str(root),
        node=socket.gethostname().split(".")[0],
        partition=PARTITION,
        gpu_slots=gpu_slots or default_gpu_slots(),
        gres=gres,
        cpus=int(hardware["CPUs"]),
        memory_mb=int(hardware["RealMemory"]),
        ctld_port=free_port(),
        slurmd_port=free_port(),
    )
    (root / "slurm.conf").write_text(slurm_conf(root, cluster, hardware))
    (root / "gres.conf").write_text(f"Name={gres} Count={cluster.gpu_slots}\n")
    _write_key(root / "munge" / "munge.key")
    try:
        _start_daemons(root, cluster, deadline_s)
    except BaseException:  # nothing left running from a start that did not finish
        stop(root)
        raise
    (root / "cluster.json").write_text(json.dumps(asdict(cluster), indent=2) + "\n")
    (root / "slurm.env").write_text(cluster.exports())
    return cluster


def _write_key(path: Path) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(1024))


def _command(root: Path, daemon: str) -> list[str]:
    munge = root / "munge"
    if daemon == "munged":
        return [
            program("munged"),
            "--foreground",
            f"--key-file={munge / 'munge.key'}",
            f"--socket={munge / 'munge.socket'}",
            f"--pid-file={root / 'run' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--seed-file={munge / 'munged.seed'}",
        ]
    # -D: in the foreground, a child of this process, so an early exit is seen at once;
    # slurmctld -c: a fresh cluster, no jobs from an earlier one
    flags = ["-D", "-c"] if daemon == "slurmctld" else ["-D"]
    return [program(daemon), *flags, "-f", str(root / "slurm.conf")]


def _start_daemons(root: Path, cluster: Cluster, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    ready = {
        "munged": lambda: _munge_answers(root),
        "slurmctld": lambda: _ctld_answers(cluster),
        "slurmd": lambda: _node_ready(cluster),
    }
    for daemon in DAEMONS:
        log = (root / "log" / f"{daemon}.out").open("ab")
        proc = subprocess.Popen(
            _command(root, daemon),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **cluster.env},
            start_new_session=True,  # not in this shell's process group: Ctrl-C there is ours
        )
        (root / "run" / f"{daemon}.started").write_text(f"{proc.pid}\n")

        def up(proc=proc, daemon=daemon) -> bool:
            if proc.poll() is not None:
                raise ClusterError(
                    f"{daemon} exited ({proc.returncode}); see {root}/log/{daemon}.out and "
                    f"{root}/log/{daemon}.log"
                )
            return ready[daemon]()

        if not wait_until(up, max(end - time.monotonic(), 0.0), interval_s=0.1):
            raise ClusterError(
                f"{daemon} did not come up within {deadline_s:.0f} s; see {root}/log/{daemon}.log"
            )


def _slurm(cluster: Cluster, *argv: str, timeout: float = 15) -> subprocess.CompletedProcess:
    return subprocess.run(
        [program(argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **cluster.env},
        check=False,
    )


def _munge_answers(root: Path) -> bool:
    sock = root / "munge" / "munge.socket"
    if not sock.exists():
        return False
    enc = subprocess.run(
        [program("munge"), "-S", str(sock), "-n"], capture_output=True, timeout=10, check=False
    )
    return enc.returncode == 0 and enc.stdout.startswith(b"MUNGE:")


def _ctld_answers(cluster: Cluster) -> bool:
    return "is UP" in _slurm(cluster, "scontrol", "ping").stdout


def _node_ready(cluster: Cluster) -> bool:
    """True once the node is idle; an INVAL or DRAIN node fails at once, with SLURM's reason."""
    out = _slurm(cluster, "sinfo", "-h", "-N", "-n", cluster.node, "-o", "%t").stdout.strip()
    if out.startswith(("inval", "drain", "drng")):
        node = _slurm(cluster, "scontrol", "show", "node", cluster.node).stdout
        reason = next((ln.strip() for ln in node.splitlines() if "Reason=" in ln), out)
        raise ClusterError(
            f"node {cluster.node} registered as {out}: {reason}; see {cluster.root}/log/slurmd.log"
        )
    return out == "idle"


def running(root: Path) -> Cluster | None:
    """The cluster in `root` if its three daemons run and slurmctld answers, else None."""
    root = root.resolve()
    try:
        cluster = Cluster(**json.loads((root / "cluster.json").read_text()))
    except (FileNotFoundError, json.JSONDecodeError, TypeError):
        return None
    if not all(_daemon_pid(root, d) for d in DAEMONS):
        return None
    try:
        return cluster if _ctld_answers(cluster) else None
    except (subprocess.TimeoutExpired, ClusterError):
        return None


def _daemon_pid(root: Path, daemon: str) -> int | None:
    """The pid start() recorded, if that process still runs this daemon from `root`."""
    try:
        pid = int((root / "run" / f"{daemon}.started").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    # a recycled pid runs something else: only ours names root's config, key or socket
    if daemon.encode() in cmdline and str(root).encode() in cmdline and pid_alive(pid):
        return pid
    return None


def stop(root: Path, deadline_s: float = STOP_DEADLINE_S) -> None:
    """Cancel every job, wait for their steps to end, then stop slurmd, slurmctld and munged.
    Nothing of the cluster is left running; its folder stays (logs). Idempotent."""
    root = root.resolve()
    end = time.monotonic() + deadline_s
    try:
        cluster = Cluster(**json.loads((root / "cluster.json").read_text()))
    except (FileNotFoundError, json.JSONDecodeError, TypeError):
        cluster = None
    if cluster is not None and _daemon_pid(root, "slurmctld") and _daemon_pid(root, "slurmd"):
        _cancel_all(cluster, end)
    for daemon in reversed(DAEMONS):
        pid = _daemon_pid(root, daemon)
        if pid is not None:
            _terminate(pid, end)
        (root / "run" / f"{daemon}.started").unlink(missing_ok=True)
    for pid in _stepds(root):  # a step slurmd could not end: slurmstepd outlives slurmd
        _terminate(pid, end)


def _cancel_all(cluster: Cluster, end: float) -> None:
    """scancel every job (SIGTERM, then SIGKILL after KillWait) and wait for their steps."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        _slurm(cluster, "scancel", "--partition", cluster.partition)

    def gone() -> bool:
        queue = _slurm(cluster, "squeue", "-h", "-o", "%T").stdout.split()
        return not queue and not _stepds(Path(cluster.root))

    wait_until(gone, max(end - time.monotonic(), 0.0), interval_s=0.2)


def _terminate(pid: int, end: float) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if not wait_until(lambda: not pid_alive(pid), max(end - time.monotonic(), 1.0), 0.1):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), 10.0, 0.1)


def _stepds(root: Path) -> list[int]:
    """The live slurmstepd processes of this cluster: each listens on a socket in its spool."""
    spool = f"{root}/spool/"
    inodes = set()
    with contextlib.suppress(FileNotFoundError):
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7].startswith(spool):
                inodes.add(f"socket:[{parts[6]}]")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() != "slurmstepd":
                continue
            fds = {os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(f"/proc/{entry}/fd")}
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if fds & inodes and pid_alive(int(entry)):
            found.append(int(entry))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweep.services slurm", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", type=Path, default=Path("results/slurm"))
    parser.add_argument(
        "--gpu-slots",
        type=int,
        default=None,
        help=f"the node's {GRES} GRES count (default: its NVIDIA GPUs, else 2)",
    )
    args = parser.parse_args(argv)
    if args.action == "stop":
        stop(args.dir)
        print(f"stopped the SLURM cluster in {args.dir}")
        return 0
    started = time.monotonic()
    try:
        cluster = start(args.dir, args.gpu_slots)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"SLURM node {cluster.node}: {cluster.cpus} CPUs, {cluster.memory_mb} MB, "
        f"{cluster.gres_count}, partition {cluster.partition} "
        f"(idle after {time.monotonic() - started:.1f} s)"
    )
    print(f"\nIn the submitting shell:  source {Path(cluster.root)}/slurm.env")
    print("then:                     python sweep.py -m hydra/launcher=slurm_local ...")
    print(f"Stop it:                  python -m sweep.services slurm stop --dir {args.dir}")
    return 0
