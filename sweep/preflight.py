"""`python -m sweep.preflight [overrides]`: what would sink an overnight sweep, checked at second 0.

Also run at the start of every `python sweep.py -m` (skip with `preflight=false`). Each check
prints pass, warn or fail with what to do about it; nothing here starts a server, and on the
simulator it all takes a couple of seconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
from omegaconf import DictConfig, OmegaConf

from harness.command import engine_program
from harness.drafter_gate import drafter_problems
from harness.errors import ConfigError
from harness.flags import engine_python, installed_sglang_version, surface_of
from harness.gpu import gpu_inventory, gpu_processes
from harness.procs import leftover_pid, port_is_free
from harness.sglang import CURRENT, LEGACY
from sweep.space import SearchSpace
from sweep.storage import ensure_schema, redact_url
from sweep.tracking import resolve_sqlite_uri

GIB = 2**30


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # pass | warn | fail
    message: str
    fix: str = ""


def space_hash(space: DictConfig) -> str:
    blob = json.dumps(OmegaConf.to_container(space, resolve=True), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _top(space: SearchSpace, name: str, fallback):
    param = space.params.get(name)
    if param is None:
        return fallback
    if param.type == "categorical":
        return max((c for c in param.choices if c is not None), default=fallback)
    return param.high


def _drafter_choices(cfg: DictConfig, space: SearchSpace) -> list[str | None]:
    """Drafter paths the sweep may launch: the configured one and any the space selects."""
    paths = [cfg.drafter.path]
    for param in space.params.values():
        if param.key == "drafter":
            conf = Path(__file__).resolve().parent.parent / "conf" / "drafter"
            for choice in param.choices:
                file = conf / f"{choice}.yaml"
                if file.is_file():
                    paths.append(OmegaConf.load(file).get("path"))
    return [p for p in dict.fromkeys(paths) if p]


def check_engine(cfg: DictConfig) -> Check:
    wanted = cfg.engine.sglang_version
    if cfg.engine.name == "sim":
        return Check("engine", "pass", f"simulator (harness.sim), SGLang {wanted} surface")
    program = tuple(cfg.engine.program)
    python = engine_python(engine_program(program))
    version = installed_sglang_version(python) if python else None
    if version is None:
        return Check(
            "engine",
            "fail",
            f"SGLang is not installed for {python or program[0]}",
            "pip install -e '.[sglang]' (or point engine.program at its python)",
        )
    try:
        speaks = surface_of(version)
    except ConfigError as exc:
        return Check("engine", "fail", str(exc), f"install SGLang {CURRENT} (or {LEGACY}.x)")
    if wanted is not None and speaks != wanted:
        return Check(
            "engine",
            "fail",
            f"SGLang {version} is installed; the configs speak the {wanted} flag set",
            f"set engine.sglang_version={speaks} (or leave it unset to detect it)",
        )
    return Check("engine", "pass", f"SGLang {version}, {speaks} flag set")


def check_gpus(cfg: DictConfig, space: SearchSpace) -> list[Check]:
    inventory = gpu_inventory()
    if inventory is None:
        if cfg.engine.name == "sim":
            return [Check("gpus", "pass", "no NVML here; the simulator needs no GPU")]
        return [
            Check(
                "gpus",
                "warn",
                "cannot inspect GPUs (NVML unavailable)",
                "pip install -e '.[gpu]' so stale processes and free memory are checked",
            )
        ]
    checks = []
    hw = cfg.hardware
    if inventory["count"] < hw.gpus:
        checks.append(
            Check(
                "gpus",
                "fail",
                f"{inventory['count']} GPUs visible, hardware.gpus={hw.gpus}",
                "fix CUDA_VISIBLE_DEVICES or choose the matching hardware config",
            )
        )
    elif str(hw.gpu).lower().replace("nvidia ", "") not in str(inventory["model"]).lower():
        checks.append(
            Check(
                "gpus",
                "warn",
                f"GPU model {inventory['model']!r}, config says {hw.gpu!r}",
                "choose the hardware config that matches this box",
            )
        )
    else:
        checks.append(
            Check(
                "gpus",
                "pass",
                f"{inventory['count']}x {inventory['model']}, driver {inventory['driver']}",
            )
        )
    holders = gpu_processes() or []
    if holders:
        listed = ", ".join(
            f"pid {p.pid} on GPU {p.gpu} ({p.used_mib:.0f} MiB)" for p in holders[:5]
        )
        checks.append(
            Check(
                "gpu memory",
                "fail",
                f"processes already hold GPU memory: {listed}",
                "stop them (a half-killed server?) before the sweep starts",
            )
        )
    fraction = _top(space, "mem_fraction_static", cfg.server.mem_fraction_static) or 0.9
    short = [
        i
        for i, (free, total) in enumerate(
            zip(inventory["free_mib"], inventory["total_mib"], strict=True)
        )
        if free < fraction * total
    ]
    if short:
        checks.append(
            Check(
                "gpu memory",
                "fail",
                f"GPUs {short} have less free memory than mem_fraction_static={fraction} needs",
                "free the GPUs or lower the fraction",
            )
        )
    return checks


def _host_ram_gb(cfg: DictConfig) -> tuple[float, str]:
    if cfg.engine.name == "sim":
        return float(cfg.hardware.host_ram_gb), "the simulated box (hardware.host_ram_gb)"
    pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return pages / GIB, "available on this machine"


def check_host(cfg: DictConfig, space: SearchSpace) -> list[Check]:
    checks = []
    hicache = _top(space, "hicache_size", cfg.server.hicache_size) or 0
    need = hicache * cfg.model.tp + cfg.model.host_ram_gb
    have, where = _host_ram_gb(cfg)
    detail = (
        f"HiCache up to {hicache} GB x TP {cfg.model.tp} + model {cfg.model.host_ram_gb} GB = "
        f"{need:.0f} GB needed; {have:.0f} GB {where}"
    )
    if need > have:
        checks.append(
            Check("host ram", "fail", detail, "lower the top of search.space.hicache_size")
        )
    else:
        checks.append(Check("host ram", "pass", detail))
    results = Path(cfg.tracking.dir).resolve()
    existing = next(p for p in (results, *results.parents) if p.exists())
    free = shutil.disk_usage(existing).free / GIB
    status = "fail" if free < 1 else "warn" if free < 5 else "pass"
    checks.append(
        Check(
            "disk",
            status,
            f"{free:.1f} GB free for {results}",
            "" if status == "pass" else "free space or set tracking.dir elsewhere",
        )
    )
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if cfg.engine.name == "sglang" else 1024
    checks.append(
        Check(
            "open files",
            "pass" if soft >= wanted else "warn",
            f"limit {soft} (SGLang wants >= {wanted})"
            if cfg.engine.name == "sglang"
            else f"limit {soft}",
            "" if soft >= wanted else "ulimit -n 65536",
        )
    )
    return checks


def _size_gb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / GIB


def check_paths(cfg: DictConfig, space: SearchSpace) -> list[Check]:
    checks = []
    for what, path in [("model", cfg.model.path)] + [
        ("drafter", p) for p in _drafter_choices(cfg, space)
    ]:
        local = path.startswith(("/", "./", "../", "~"))
        p = Path(path).expanduser()
        if not local:
            status = "pass" if cfg.engine.name == "sim" else "warn"
            checks.append(
                Check(
                    what,
                    status,
                    f"{path}: a hub id"
                    + (
                        ", not loaded by the simulator"
                        if status == "pass"
                        else ", downloaded at launch (needs the network)"
                    ),
                )
            )
        elif not p.exists():
            status = "pass" if cfg.engine.name == "sim" else "fail"
            checks.append(
                Check(
                    what,
                    status,
                    f"{path}: not on this machine"
                    + ("; the simulator does not load it" if status == "pass" else ""),
                    "" if status == "pass" else f"fix {what}.path",
                )
            )
        elif not os.access(p, os.R_OK):
            checks.append(
                Check(what, "fail", f"{path}: not readable", f"fix the permissions of {path}")
            )
        else:
            checks.append(Check(what, "pass", f"{path}: {_size_gb(p):.1f} GB"))
        if what == "drafter" and p.is_dir():
            problems = drafter_problems(
                path,
                cfg.model.path,
                cfg.drafter.algorithm,
                "static",
                Path(cfg.tracking.dir).resolve() / "drafter-checks",
            )
            if problems:
                checks.append(
                    Check(
                        "drafter check", "fail", problems, "python -m drafter check --drafter ..."
                    )
                )
    return checks


def check_network(cfg: DictConfig) -> Check:
    host, port = cfg.server.host, cfg.server.port
    if port_is_free(host, port):
        return Check("port", "pass", f"{host}:{port} is free")
    pid_file = Path(cfg.tracking.dir).resolve() / "servers" / f"port-{port}.pid"
    pid = leftover_pid(pid_file)
    if pid is not None:
        return Check(
            "port",
            "warn",
            f"{host}:{port} is held by pid {pid}, a server a crashed sweep left",
            "nothing: it is stopped before the first launch",
        )
    return Check(
        "port",
        "fail",
        f"{host}:{port} is in use by another process",
        "stop it or choose another port with server.port=<port>",
    )


def check_tracking(cfg: DictConfig) -> list[Check]:
    checks = []
    results = Path(cfg.tracking.dir).resolve()
    try:
        results.mkdir(parents=True, exist_ok=True)
        probe = results / ".preflight-write-test"
        probe.write_text("ok")
        probe.unlink()
        checks.append(Check("results dir", "pass", f"{results} is writable"))
    except OSError as exc:
        checks.append(
            Check(
                "results dir",
                "fail",
                f"{results}: {exc.strerror}",
                "set tracking.dir to a writable folder",
            )
        )
    uri = cfg.tracking.mlflow_uri
    shown = redact_url(uri)
    if uri.startswith(("http://", "https://")):
        try:
            ok = httpx.get(uri.rstrip("/") + "/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            ok = False
        checks.append(
            Check(
                "mlflow",
                "pass" if ok else "fail",
                f"{shown} " + ("answers" if ok else "does not answer"),
                "" if ok else "start the MLflow server or fix tracking.mlflow_uri",
            )
        )
    else:
        checks.append(Check("mlflow", "pass", redact_url(resolve_sqlite_uri(uri))))
    checks.append(check_study(cfg))
    return checks


def check_study(cfg: DictConfig) -> Check:
    import optuna

    storage = resolve_sqlite_uri(cfg.tracking.optuna_storage)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        ensure_schema(storage)
        study = optuna.load_study(study_name=cfg.search.study_name, storage=storage)
    except KeyError:
        return Check("study", "pass", f"new study {cfg.search.study_name!r}")
    except Exception as exc:  # any storage failure fails the check
        # The driver's message can quote the URL (password included): redact both.
        reason = redact_url(str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc))
        return Check(
            "study",
            "fail",
            f"Optuna storage {redact_url(storage)}: {reason}",
            "start the database (python -m sweep.services start) or fix tracking.optuna_storage",
        )
    n = len(study.get_trials(deepcopy=False))
    recorded = study.user_attrs.get("space_hash")
    if recorded is None:
        return Check("study", "pass", f"{cfg.search.study_name!r} has {n} trials")
    if recorded != space_hash(cfg.search.space):
        return Check(
            "study",
            "warn",
            f"{cfg.search.study_name!r} has {n} trials from another search space",
            "mixing spaces confuses the sampler: use a new search.study_name",
        )
    return Check("study", "pass", f"{cfg.search.study_name!r} has {n} trials; same search space")


def run(cfg: DictConfig) -> list[Check]:
    space = SearchSpace.from_config(cfg.search.space)
    return [
        check_engine(cfg),
        *check_gpus(cfg, space),
        *check_host(cfg, space),
        *check_paths(cfg, space),
        check_network(cfg),
        *check_tracking(cfg),
    ]


def render(checks: list[Check]) -> list[str]:
    mark = {"pass": "[green]pass[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}
    lines = []
    for c in checks:
        line = f"  {mark[c.status]}  {c.name:<12} {c.message}"
        if c.fix and c.status != "pass":
            line += f" -> {c.fix}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    from hydra import compose, initialize_config_dir

    from sweep.app import CONF_DIR
    from sweep.console import console

    overrides = sys.argv[1:] if argv is None else argv
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    checks = run(cfg)
    console.print(f"preflight for study {cfg.search.study_name} (engine={cfg.engine.name})")
    for line in render(checks):
        console.print(line, soft_wrap=True)
    failed = [c for c in checks if c.status == "fail"]
    console.print("[red]not ready: fix the failures above[/]" if failed else "[green]ready[/]")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
