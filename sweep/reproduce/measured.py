"""What the trial to deploy ran on, as it recorded it, and the flags that pin it in the export.

A server resolves some of its settings itself, and the speed measured belongs to what it
resolved: the attention backend (chosen from the GPU, the model and topk when not given:
harness.sglang.attention), the running-request cap (speculation resets an unset one to 48) and
the decode CUDA-graph batch size (clamped to that cap). The trial recorded them from /server_info
as `effective` in result.json (harness.trial.EFFECTIVE_KEYS), and its engine in provenance.json:
`software` (SGLang's version, or the simulator's) and `sglang_release` (the SGLang surface it
spoke). A run whose trial folder moved is read from MLflow's copy (its `effective.*` params,
`specsweep.software.*` tags). A value a trial did not record (a folder from before it was
recorded) stays None, and the export says so instead of inventing it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.sglang.surfaces import surface
from harness.spec import ServerSpec

NOT_RECORDED = "not recorded"
ATTENTION_FLAG = "--attention-backend"


@dataclass(frozen=True)
class Measured:
    attention_backend: str | None
    max_running_requests: int | None
    cuda_graph_max_bs: int | None  # the decode batch size the graphs were captured up to
    mem_fraction_static: float | None
    sglang: str | None  # the SGLang version that ran it; for the simulator, the one it spoke
    simulator: str | None  # the simulator's version (None: real SGLang)
    source: str  # where it was read

    @property
    def engine(self) -> str:
        """The engine in words: "SGLang 0.5.23", or the simulator and the SGLang it spoke."""
        if self.simulator is not None:
            spoke = f", speaking SGLang {self.sglang}'s flags" if self.sglang else ""
            return f"the simulator (specsweep {self.simulator}{spoke})"
        return f"SGLang {self.sglang}" if self.sglang else f"the engine's version {NOT_RECORDED}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "attention_backend": self.attention_backend,
            "max_running_requests": self.max_running_requests,
            "cuda_graph_max_bs": self.cuda_graph_max_bs,
            "mem_fraction_static": self.mem_fraction_static,
            "engine": self.engine,
            "sglang_version": self.sglang,
            "simulator_version": self.simulator,
            "source": self.source,
        }


def _none(value: Any) -> Any:
    return None if value in (None, "None", "") else value


def _number(value: Any, kind: type) -> Any:
    value = _none(value)
    return None if value is None else kind(float(value)) if kind is int else kind(value)


def _from(effective: Mapping[str, Any], software: Mapping[str, Any], source: str) -> Measured:
    graphs = _none(effective.get("cuda_graph_max_bs_decode"))  # 0.5.23's resolved decode batch
    if graphs is None:
        graphs = _none(effective.get("cuda_graph_max_bs"))  # 0.5.1's
    return Measured(
        attention_backend=_none(effective.get("attention_backend")),
        max_running_requests=_number(effective.get("max_running_requests"), int),
        cuda_graph_max_bs=_number(graphs, int),
        mem_fraction_static=_number(effective.get("mem_fraction_static"), float),
        sglang=_none(software.get("sglang")),
        simulator=_none(software.get("simulator")),
        source=source,
    )


def read(
    folder: Path | None, params: Mapping[str, str], tags: Mapping[str, str], spoke: str | None
) -> Measured:
    """From the trial folder's result.json and provenance.json; without them, from the MLflow
    run's params and tags. `spoke`: the SGLang surface the config named (engine.sglang_version),
    for a simulated trial whose provenance does not say."""
    result = folder / "result.json" if folder is not None else None
    if folder is not None and result is not None and result.is_file():
        effective = json.loads(result.read_text()).get("effective") or {}
        software: dict[str, Any] = {}
        provenance = folder / "provenance.json"
        if provenance.is_file():
            recorded = json.loads(provenance.read_text())
            software = dict(recorded.get("software") or {})
            if "simulator" in software:
                software["sglang"] = (recorded.get("sglang_release") or {}).get("version") or spoke
        return _from(effective, software, str(result))
    prefix = "effective."
    effective = {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}
    prefix = "specsweep.software."
    software = {k.removeprefix(prefix): v for k, v in tags.items() if k.startswith(prefix)}
    if "simulator" in software:
        software["sglang"] = spoke
    return _from(effective, software, "the MLflow run (its trial folder is not on this machine)")


@dataclass(frozen=True)
class Pinned:
    """The server to deploy with what was measured pinned, and a line for each pin or gap."""

    server: ServerSpec
    notes: list[str] = field(default_factory=list)
    flags: dict[str, str] = field(default_factory=dict)  # flag -> value, as the argv has them


def pin(
    server: ServerSpec,
    measured: Measured,
    given_flags: list[str],
    version: str,
    attention: bool = True,
    simulated: bool = False,
) -> Pinned:
    """`server` with the recorded attention backend (unless `attention` is False), request cap
    and decode CUDA-graph batch as flags. `given_flags`: the extra flags already in the launch
    (a backend named there stays as given). Where the launch left the fraction to SGLang, the
    recorded one is pinned too: a cap given on the command line changes the reserve SGLang's
    own fraction subtracts (harness.sglang.memory), so the pins would move it."""
    how = " (as the simulator resolved it)" if simulated else ""
    changes: dict[str, Any] = {}
    notes = []
    flags: dict[str, str] = {}
    named = any(f == ATTENTION_FLAG or f.startswith(ATTENTION_FLAG + "=") for f in given_flags)
    if named:
        notes.append(f"{ATTENTION_FLAG}: as the trial's launch gave it.")
    elif not attention:
        notes.append(
            f"{ATTENTION_FLAG} left to SGLang (--no-attention-pin): it picks one from the GPU, "
            f"the model and topk; the trial ran on {measured.attention_backend or NOT_RECORDED}."
        )
    elif measured.attention_backend is None:
        notes.append(
            f"{ATTENTION_FLAG} is not pinned: the trial {NOT_RECORDED} the backend it ran on "
            "(a trial folder from before specsweep recorded it); SGLang will pick one."
        )
    else:
        changes["extra_args"] = (*server.extra_args, ATTENTION_FLAG, measured.attention_backend)
        flags[ATTENTION_FLAG] = measured.attention_backend
        notes.append(
            f"{ATTENTION_FLAG} {measured.attention_backend}: the backend the trial ran on{how}. "
            "On another GPU it may not exist or not be SGLang's choice: export with "
            "--no-attention-pin to let SGLang pick."
        )
    for name, flag, value in (
        ("max_running_requests", "--max-running-requests", measured.max_running_requests),
        (
            "cuda_graph_max_bs",
            surface(version).flag_for("cuda_graph_max_bs"),
            measured.cuda_graph_max_bs,
        ),
    ):
        if name == "cuda_graph_max_bs" and server.disable_cuda_graph:
            notes.append("CUDA graphs were off for the trial (server.disable_cuda_graph).")
        elif value is None:
            notes.append(f"{flag} is not pinned: {NOT_RECORDED} by the trial.")
        else:
            changes[name] = value
            flags[flag] = str(value)
            notes.append(f"{flag} {value}: as the server reported it for the trial{how}.")
    fraction = "--mem-fraction-static"
    given = any(f == fraction or f.startswith(fraction + "=") for f in given_flags)
    if server.mem_fraction_static is None and not given and measured.mem_fraction_static:
        changes["mem_fraction_static"] = measured.mem_fraction_static
        flags[fraction] = str(measured.mem_fraction_static)
        notes.append(
            f"{fraction} {measured.mem_fraction_static}: the fraction SGLang chose for the "
            f"trial{how}, pinned because the caps above change its own choice."
        )
    return Pinned(replace(server, **changes), notes, flags)
