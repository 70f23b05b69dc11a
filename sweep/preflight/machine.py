"""Preflight checks of the machine: the engine, the GPUs, disk and open files."""

from __future__ import annotations

import contextlib
import io
import resource
import shutil
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.server.command import engine_program
from harness.server.flags import (
    Python,
    engine_python,
    installed_sglang_version,
    probe_sglang,
    surface_of,
)
from harness.server.gpu import gpu_processes
from harness.sglang.surfaces import (
    ASSUMED_FOR_UNREAD,
    CURRENT,
    LEGACY,
    RELEASES_READ,
    release_read,
)
from sweep.launch.parse_check import sim_unmodelled
from sweep.preflight.check import Check
from sweep.preflight.launched import Knob

GIB = 2**30


def _wrapper_check(program: tuple[str, ...], wanted: str | None) -> Check:
    """A program that is not a Python (docker run, srun, a script) and no engine.probe: its SGLang
    cannot be read from here, so say which flag set the sweep assumes and carry on."""
    assumed = (
        f"the {wanted} flag set (engine.sglang_version)"
        if wanted
        else f"the {CURRENT} flag set (engine.sglang_version is unset)"
    )
    return Check(
        "engine",
        "warn",
        f"{program[0]} is not a Python (a container, srun or a wrapper script?): could not check "
        f"the SGLang it runs from here; the sweep speaks {assumed}",
        "set engine.probe to a command that runs a Python beside that SGLang, e.g. "
        "engine.probe=[docker,run,--rm,IMAGE,python3] (docs/preflight.md)",
    )


def _sim_unmodelled(cfg: DictConfig) -> str | None:
    """A flag in the extra args the simulator refuses as not modelled (a page size above 1)."""
    extra = [str(a) for a in (*cfg.server.get("extra_args", []), *cfg.engine.get("extra_args", []))]
    if not extra:
        return None
    version = cfg.engine.sglang_version or CURRENT
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            return sim_unmodelled(["--model-path", "m", *extra], version)
    except SystemExit:  # a flag the simulator's parser refuses: the sweep's launch check says it
        return None


def check_engine(cfg: DictConfig) -> Check:
    wanted = cfg.engine.sglang_version
    if cfg.engine.name == "sim":
        if (why := _sim_unmodelled(cfg)) is not None:
            return Check(
                "engine",
                "fail",
                why,
                "remove that flag from server.extra_args / engine.extra_args, or run on "
                "engine=sglang",
            )
        return Check("engine", "pass", f"simulator (harness.sim), SGLang {wanted} surface")
    program = engine_program(tuple(cfg.engine.program))
    probe = tuple(cfg.engine.get("probe") or ())
    own = engine_python(program)
    python: Python | None = probe or own
    if python is None:
        return _wrapper_check(program, wanted)
    where = f"engine.probe ({' '.join(probe)})" if probe else python
    # The surface the sweep will speak: engine.sglang_version, else what `detected_surface`
    # reads from the program's own Python (a wrapper's: the current one).
    speaking = wanted or (None if own else CURRENT)
    version = installed_sglang_version(python)
    if version is None:
        return Check(
            "engine",
            "fail",
            f"SGLang is not installed for {where}",
            "fix engine.probe so it runs the Python that has SGLang"
            if probe
            else "pip install -e '.[sglang]' (or point engine.program at its python)",
        )
    try:  # which flags its own parser has decides the surface, not a version list
        installed = probe_sglang(python)
    except RuntimeError as exc:
        installed, why = None, str(exc).splitlines()[-1]
    if installed is not None and installed.surface is not None:
        speaks, how = installed.surface, "read from its parser"
    else:
        try:
            speaks, how = surface_of(version), "by its version"
        except ConfigError as exc:
            reason = why if installed is None else "its parser has neither surface's flags"
            return Check(
                "engine",
                "fail",
                f"{exc} ({reason})",
                f"install SGLang {CURRENT} (or {LEGACY}.x), or fix its import in {where}",
            )
    if speaking is not None and speaks != speaking:
        return Check(
            "engine",
            "fail",
            f"SGLang {version} is installed and speaks the {speaks} flag set ({how}); the configs "
            f"speak the {speaking} flag set",
            f"set engine.sglang_version={speaks}"
            + ("" if probe else " (or leave it unset to detect it)"),
        )
    found = f"SGLang {version}, {speaks} flag set ({how})" + (f", via {where}" if probe else "")
    if not release_read(version):
        return unread_release_check(found, version)
    return Check("engine", "pass", found)


def unread_release_check(found: str, version: str) -> Check:
    """A version outside RELEASES_READ: its flags are its parser's, but the rest was read in other
    releases' source, so say what is assumed (the first ready server is then checked against what
    the harness parses, and provenance records verified: false)."""
    read = ", ".join(RELEASES_READ)
    return Check(
        "engine",
        "warn",
        f"{found}; {version} is not a release specsweep has read ({read}), so it assumes "
        f"{CURRENT}'s " + "; ".join(ASSUMED_FOR_UNREAD) + ". The first ready server is "
        "checked against what the harness parses (result.json surface_mismatches) and "
        "provenance records verified: false",
        f"install a release read: pip install -e '.[sglang]' (sglang {CURRENT}), or keep "
        f"{version} and read the first trial's surface_mismatches",
    )


def check_gpus(
    cfg: DictConfig, fraction: Knob | None, inventory: dict[str, Any] | None
) -> list[Check]:
    """The GPUs NVML sees (`inventory`; None: not readable) against the config, and their free
    memory against the fractions the sweep launches (`fraction`, as its memory policy takes it)."""
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
    checks += _free_memory(inventory, fraction)
    return checks


def _free_memory(inventory: dict[str, Any], fraction: Knob | None) -> list[Check]:
    """FAIL where a GPU's free memory is below the smallest fraction the sampler proposes (the
    held one, where the policy holds it); warn where below the largest any launch takes."""
    if fraction is None:  # left to SGLang, which sizes from the memory it finds free
        return []
    pairs = list(zip(inventory["free_mib"], inventory["total_mib"], strict=True))
    for status, value in (("fail", min(fraction.sampled)), ("warn", max(fraction.launched))):
        short = [i for i, (free, total) in enumerate(pairs) if free < value * total]
        if short:
            return [
                Check(
                    "gpu memory",
                    status,
                    f"GPUs {short} have less free memory than {fraction.name}={value:g} needs "
                    f"({fraction.name} {fraction.why})",
                    "free the GPUs or lower the fraction",
                )
            ]
    return []


def check_host(cfg: DictConfig) -> list[Check]:
    """Disk for the results and the open-file limit (host memory: sweep.preflight.host_ram)."""
    checks = []
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
