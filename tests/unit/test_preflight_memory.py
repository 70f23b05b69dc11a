"""Preflight's memory figures, each with its source, and its verdicts at the values the memory
policy launches (sweep.preflight.weights, host_ram); the policy's decision it reuses
(sweep.study.search.memory.policies, held_hicache); the files SGLang loads
(harness.sglang.host_memory)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, IntDistribution
from safetensors.numpy import save_file

from harness.sglang.host_memory import HICACHE_RESERVE_BYTES, weight_files
from sweep.preflight.host_ram import check_host_ram, largest_fitting, need_gb
from sweep.preflight.launched import Knob
from sweep.preflight.machine import check_gpus
from sweep.preflight.weights import GIB, check_weights, model_weights
from sweep.study.search import memory
from sweep.study.trial.capacity import Demand
from sweep.study.trial.objective import Objective

RESERVE_GB = HICACHE_RESERVE_BYTES / 1e9  # 10 GiB = 10.74 GB


def _cfg(path: str = "/models/Kimi-K2.5", *, engine="sim", tp=8, profile="kimi_k25", **hw):
    return OmegaConf.create(
        {
            "engine": {"name": engine},
            "model": {"path": path, "tp": tp, "host_ram_gb": 64.0, "sim_profile": profile},
            "hardware": {"gpu_memory_gb": 96, "host_ram_gb": 1024, **hw},
        }
    )


def _checkpoint(folder: Path, shards: int = 2, floats: int = 256 * 1024) -> Path:
    """A checkpoint of `shards` safetensors files of `floats` float32 each."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({f"w{i}": np.zeros(floats, np.float32)}, str(folder / name))
    return folder


def _size(folder: Path, pattern: str = "*.safetensors") -> int:
    return sum(f.stat().st_size for f in folder.glob(pattern))


@pytest.fixture(autouse=True)
def _empty_hf_cache(tmp_path, monkeypatch):
    """Hub ids resolve against an empty cache of the test's own, not this machine's."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))


# -- which files SGLang loads -------------------------------------------------------------------

FILES = [
    # files in the folder, the index's files (None: no index), what --load-format auto loads
    (["a.safetensors", "b.safetensors"], None, ("safetensors", ["a.safetensors", "b.safetensors"])),
    (["a.safetensors", "b.safetensors"], ["b.safetensors"], ("safetensors", ["b.safetensors"])),
    (["m.safetensors", "pytorch_model.bin"], None, ("safetensors", ["m.safetensors"])),
    (
        ["pytorch_model.bin", "training_args.bin", "optimizer.bin"],
        None,
        ("bin", ["pytorch_model.bin"]),
    ),
    (["config.json"], None, ("", [])),
]


@pytest.mark.parametrize(("names", "index", "loaded"), FILES)
def test_the_weight_files_are_those_sglang_loads(tmp_path, names, index, loaded):
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    if index is not None:
        weight_map = {f"w{i}": name for i, name in enumerate(index)}
        (tmp_path / "model.safetensors.index.json").write_text(
            json.dumps({"weight_map": weight_map})
        )
    kind, files = weight_files(tmp_path)
    assert (kind, [f.name for f in files]) == loaded


# -- the model's figure and its source ----------------------------------------------------------


def test_a_checkpoint_on_disk_is_read_from_its_files_and_split_by_tp(tmp_path):
    folder = _checkpoint(tmp_path / "kimi")
    weights = model_weights(_cfg(str(folder)))
    assert weights is not None and weights.read
    assert weights.total_bytes == _size(folder)
    assert weights.per_gpu(8) == _size(folder) / 8
    assert weights.source == f"2 safetensors files under {folder}"


def test_a_hub_id_in_the_local_cache_is_read_from_its_snapshot(tmp_path):
    repo = tmp_path / "hf" / "hub" / "models--moonshotai--Kimi-K2.5"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    snapshot = _checkpoint(repo / "snapshots" / "abc123", shards=3)
    weights = model_weights(_cfg("moonshotai/Kimi-K2.5"))
    assert weights is not None and weights.read and weights.total_bytes == _size(snapshot)
    assert weights.source == "3 safetensors files under moonshotai/Kimi-K2.5's cached snapshot"


UNREADABLE = [
    # model.path (FOLDER: an existing folder without weights), what the source says
    ("/models/Kimi-K2.5", "as /models/Kimi-K2.5 is not on this machine"),
    (
        "moonshotai/Kimi-K2.5",
        "as moonshotai/Kimi-K2.5 is a hub id not in the local Hugging Face cache",
    ),
    ("FOLDER", "as no *.safetensors or *.bin under FOLDER"),
]


@pytest.mark.parametrize(("path", "says"), UNREADABLE)
def test_without_a_readable_checkpoint_the_figure_is_the_stated_assumption(tmp_path, path, says):
    folder = tmp_path / "empty"
    folder.mkdir()
    path, says = path.replace("FOLDER", str(folder)), says.replace("FOLDER", str(folder))
    weights = model_weights(_cfg(path))
    assert weights is not None and not weights.read
    assert weights.source == f"assumed: the simulator's kimi_k25 profile, model.sim_profile, {says}"
    assert weights.total_bytes == 74_741 * 8 * 2**20  # harness.sim.model.profiles.KIMI_K25
    assert model_weights(_cfg(path, profile=None)) is None  # nothing to assume from


# -- host memory --------------------------------------------------------------------------------

NEED = [
    # HiCache GB per rank, TP, the server's processes GB -> GB needed
    (0, 8, 64, 64),  # HiCache off: no pool, no reserve
    (48, 8, 64, 48 * 8 + RESERVE_GB + 64),
    (16, 1, 16, 16 + RESERVE_GB + 16),
]


@pytest.mark.parametrize(("hicache", "tp", "processes", "need"), NEED)
def test_host_memory_needed(hicache, tp, processes, need):
    assert need_gb(hicache, tp, processes) == pytest.approx(need)


@pytest.mark.parametrize(
    ("have", "fits"), [(256, math.floor((256 - 64 - RESERVE_GB) / 8)), (1024, 118), (70, 0)]
)
def test_the_largest_hicache_that_fits(have, fits):
    assert largest_fitting(have, 8, 64) == fits


HELD = Knob("hicache_size", (0.0,), why="held at 0 GB: search.memory=auto pins it")
SEARCHED = Knob("hicache_size", (0.0, 48.0), why="searched up to 48 GB: search.memory=sample")
PRIOR = Knob("hicache_size", (0.0,), (48.0,), why="held at 0 GB: search.memory=auto pins it")
FIXED = Knob("hicache_size", (48.0,), why="server.hicache_size, not searched")
HOST = [
    # knob, host GB -> status, what the line says
    (
        HELD,
        256,
        "pass",
        [
            "HiCache off (held at 0 GB",
            "processes 64 GB (assumed: model.host_ram_gb)",
            "= 64 GB of a 256 GB box",
        ],
    ),
    (
        SEARCHED,
        1024,
        "pass",
        ["HiCache 48 GB x TP 8 (pinned, per rank; searched up to 48 GB", "= 459 GB of"],
    ),
    (
        SEARCHED,
        256,
        "warn",
        ["HiCache 48 GB x TP 8", "459 GB needed, more than a 256 GB box", "at 0 GB: 64 GB"],
    ),
    (PRIOR, 256, "warn", ["an enqueued trial (search.enqueue) launches at 48 GB", "459 GB needed"]),
    (HELD, 50, "fail", ["HiCache off", "64 GB needed, more than a 50 GB box"]),
    (FIXED, 256, "fail", ["server.hicache_size, not searched", "459 GB needed"]),
]


@pytest.mark.parametrize(("knob", "have", "status", "says"), HOST)
def test_host_ram_is_judged_at_the_hicache_sizes_launched(knob, have, status, says):
    check = check_host_ram(_cfg(), knob, have=(have, f"a {have} GB box"))
    assert check.status == status, check.message
    assert all(s in check.message for s in says), check.message
    if status != "pass":
        assert check.fix


def test_host_ram_says_where_the_checkpoint_is_read_from(tmp_path):
    folder = _checkpoint(tmp_path / "kimi")
    check = check_host_ram(_cfg(str(folder)), HELD, have=(256, "a 256 GB box"))
    size = f"{_size(folder) / 1e9:.3g} GB"
    assert f"the checkpoint ({size}; weights line) is read through the page cache" in check.message
    assert "it stays cached between trials" in check.message
    tight = check_host_ram(_cfg(), HELD, have=(500, "a 500 GB box"))  # 627 GB assumed
    assert "each trial's start reads it from disk" in tight.message and tight.status == "pass"


# -- the weights in the static share ------------------------------------------------------------


def _fraction(sampled, priors=(), why="held at 0.85: search.memory=auto pins it"):
    return Knob("mem_fraction_static", tuple(sampled), tuple(priors), why)


GRID = [round(0.82 + 0.01 * i, 2) for i in range(13)]
WEIGHTS = [
    # the fractions launched, engine -> status (the weights fill 0.88 of a GPU)
    (_fraction([0.9]), "sim", "pass"),
    (_fraction([0.85]), "sim", "fail"),  # held where they do not fit, never moved up
    (_fraction(GRID, why="searched up to 0.94"), "sim", "warn"),  # 0.89 and above start
    (_fraction([0.9], priors=[0.86], why="searched"), "sim", "warn"),  # a prior below
    (_fraction([0.85]), "sglang", "fail"),  # read from its files: fails on a GPU box too
]


@pytest.mark.parametrize(("fraction", "engine", "status"), WEIGHTS)
def test_the_weights_are_judged_at_the_fractions_launched(tmp_path, fraction, engine, status):
    folder = _checkpoint(tmp_path / "kimi")
    gpu_gb = _size(folder) / 0.88 / GIB  # a GPU whose static share holds them from 0.88 up
    check = check_weights(_cfg(str(folder), engine=engine, tp=1, gpu_memory_gb=gpu_gb), fraction)
    assert check.status == status, check.message
    assert check.message.startswith(
        f"2.0 MiB per GPU (2.0 MiB / TP 1; 2 safetensors files under {folder})"
    )
    assert f"static at mem_fraction_static {min(fraction.launched):g}" in check.message


def test_an_assumed_figure_warns_rather_than_fails_a_gpu_box():
    check = check_weights(_cfg(engine="sglang", tp=1), _fraction([0.85]))
    assert check.status == "warn" and "assumed: the simulator's kimi_k25 profile" in check.message
    assert "the figure is assumed" in check.fix
    assert check_weights(_cfg(engine="sim", tp=1), _fraction([0.85])).status == "fail"


def test_the_default_figures_pass_with_room_for_the_kv_pool():
    check = check_weights(_cfg(), _fraction([0.85]))
    assert check.status == "pass"
    assert check.message.startswith("73.0 GiB per GPU (583.9 GiB / TP 8; assumed:")
    assert "81.6 GiB static at mem_fraction_static 0.85 x 96 GiB (hardware.gpu_memory_gb)" in (
        check.message
    )


# -- free GPU memory (NVML) ---------------------------------------------------------------------

FREE = [
    # free share of each GPU, the fractions launched -> the gpu memory verdict (None: no line)
    (0.9, _fraction([0.85]), None),
    (0.8, _fraction([0.85]), "fail"),  # held above what is free: no launch starts
    (0.9, _fraction(GRID, why="searched up to 0.94"), "warn"),  # 0.82-0.89 start, the rest not
    (0.8, _fraction(GRID, why="searched up to 0.94"), "fail"),  # not even 0.82
    (0.9, None, None),  # left to SGLang, which sizes from what it finds free
]


@pytest.mark.parametrize(("free", "fraction", "status"), FREE)
def test_free_gpu_memory_is_judged_at_the_fractions_launched(free, fraction, status):
    inventory = {
        "count": 8,
        "model": "NVIDIA RTX PRO 6000 Blackwell",
        "driver": "580",
        "total_mib": [97_887.0] * 8,
        "free_mib": [97_887.0] * 7 + [free * 97_887.0],
    }
    cfg = OmegaConf.create(
        {"engine": {"name": "sglang"}, "hardware": {"gpus": 8, "gpu": inventory["model"]}}
    )
    lines = [c for c in check_gpus(cfg, fraction, inventory) if c.name == "gpu memory"]
    assert [c.status for c in lines] == ([status] if status else [])
    if status:
        assert lines[0].message.startswith("GPUs [7] have less free memory than")


# -- the memory policy's decision, which preflight reuses ---------------------------------------

SINGLE = Objective("tok_s", 64)
LOAD = Objective("weighted_throughput", 64, levels=[1, 64])
DEMAND = Demand(prompt_tokens=44, output_tokens=2048)
POLICIES = [
    ("auto", SINGLE, DEMAND, ("pin",)),
    ("auto", LOAD, DEMAND, ("pin", "ceiling")),  # pinned until the KV pool binds
    ("auto", LOAD, None, ("ceiling",)),  # the pool cannot be judged
    ("pin", LOAD, DEMAND, ("pin",)),
    ("ceiling", SINGLE, None, ("ceiling",)),
    ("sample", SINGLE, None, ("sample",)),
]


@pytest.mark.parametrize(("mode", "objective", "demand", "expected"), POLICIES)
def test_the_policies_a_study_runs_under(mode, objective, demand, expected):
    assert memory.policies(mode, objective, demand) == expected


@pytest.mark.parametrize(
    ("dist", "held"),
    [
        (CategoricalDistribution([0, 48]), 0),
        (CategoricalDistribution([48, 16]), 16),
        (IntDistribution(8, 64), 8),
    ],
)
def test_pin_holds_hicache_at_its_smallest(dist, held):
    assert memory.held_hicache(dist) == held
    assert memory.held_by("pin") == {"mem_fraction_static", "hicache_size"}
    assert memory.held_by("ceiling") == memory.held_by("sample") == set()
