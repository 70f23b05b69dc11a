"""Bad input at scale: random bad values for every config key, through the real composition and
the checks a sweep runs before any launch. Each is accepted, or refused with a message naming the
key (a ConfigError, or OmegaConf's type error as Hydra shows it): never a traceback.

The count of bad inputs tried is written to benchmarks/out/bad_input.json (and printed).
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.errors import ConfigError
from harness.server.procs import free_port
from sweep.config.drafter_check import check_drafter
from sweep.config.setup_key import setup_key
from sweep.config.specs import build_trial_spec
from sweep.launch.app import CONF_DIR
from sweep.launch.parse_check import check_launch_flags
from sweep.launch.slots import slot_count, worker_gpus
from sweep.study.loop.baseline import baseline_overrides
from sweep.sweeper import check_search
from tests.conftest import ROOT

TRIED: Counter[str] = Counter()  # outcome -> count, over every test in this module
PARSER = OverridesParser.create()


def _compose(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=overrides, return_hydra_config=True)


BASE = _compose([])
BASELINE_BASE = _compose(baseline_overrides([], "baseline_check"))


def leaf_keys(node: DictConfig, prefix: str = "") -> list[str]:
    """Every leaf of the composed config (a list is a leaf), Hydra's own node left out."""
    keys = []
    for name in node:
        if not prefix and name == "hydra":
            continue
        child = node._get_node(name)
        key = f"{prefix}{name}"
        if isinstance(child, DictConfig) and len(child) > 0:
            keys += leaf_keys(child, f"{key}.")
        else:
            keys.append(key)
    return keys


KEYS = leaf_keys(BASE)

# -- bad values, written as Hydra overrides -------------------------------------------------
SHELL = ["a b", "; rm -rf /", "$(id)", "`id`", "x|y", "a&&b", "<in>", "*", "~", "#", "'", '"']
ALPHABET = " ;|&$()<>*?~#!'\"`abcXYZ019_-/.,:=@%+[]"
bad_strings = st.sampled_from(["", " ", *SHELL]) | st.text(ALPHABET, max_size=12).filter(
    lambda s: "${" not in s
)
bad_numbers = (
    st.sampled_from([0, -1, -(2**31), 2**31, 2**63, 10**30, 0.5, -0.0, 1e308, -1e308])
    | st.sampled_from([math.nan, math.inf, -math.inf])
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
)
scalars = st.none() | st.booleans() | bad_numbers | bad_strings
bad_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "low", "type", "x_y"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def render(value) -> str:
    """`value` as Hydra's override grammar reads it back."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # inf, -inf, 1e+308
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "\\'") + "'"
    if isinstance(value, list):
        return "[" + ",".join(render(v) for v in value) + "]"
    return "{" + ",".join(f"{k}:{render(v)}" for k, v in value.items()) + "}"


# -- the checks a sweep runs before a launch ------------------------------------------------
def _with(base: DictConfig, overrides: list[str]) -> DictConfig:
    """`base` with `overrides` applied the way Hydra's compose applies a key=value override."""
    cfg = copy.deepcopy(base)
    ConfigLoaderImpl._apply_overrides_to_config(PARSER.parse_overrides(overrides), cfg)
    return cfg


def preflight_free_checks(trial: DictConfig, baseline: DictConfig) -> None:
    """SpecsweepSweeperImpl.plan's checks before its preflight, on composed configs."""
    check_search(trial)
    spec = build_trial_spec(trial)
    check_drafter(trial, spec)
    check_launch_flags([spec, build_trial_spec(baseline)])
    gpus = worker_gpus(trial.hardware.gpus)[: trial.hardware.gpus]
    slot_count(gpus, trial.model.tp, trial.worker.slots)
    setup_key(baseline)


def outcome(key: str, overrides: list[str], full_compose: bool = False) -> str:
    """accepted | refused; anything but a refusal naming `key` fails the test."""
    try:
        if full_compose:
            trial = _compose(overrides)
            baseline = _compose(baseline_overrides(overrides, "baseline_check"))
        else:
            trial = _with(BASE, overrides)
            kept = [o for o in baseline_overrides(overrides, "x") if o in overrides]
            baseline = _with(BASELINE_BASE, kept)
        preflight_free_checks(trial, baseline)
    except (ConfigError, HydraException, OmegaConfBaseException) as exc:
        message = f"{exc} {exc.__cause__ or ''}"
        leaf = key.rsplit(".", 1)[-1]
        if key not in message and leaf not in message:
            TRIED["failed"] += 1
            raise AssertionError(
                f"{overrides}: refused without naming {key}: {type(exc).__name__}: {message}"
            ) from exc
        TRIED["refused"] += 1
        return "refused"
    except Exception:
        TRIED["failed"] += 1  # a traceback is what the user would see
        raise
    TRIED["accepted"] += 1
    return "accepted"


@pytest.fixture(autouse=True)
def _no_inherited_gpus(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_every_leaf_key_is_enumerated():
    assert len(KEYS) > 100 and "hydra" not in {k.split(".")[0] for k in KEYS}
    assert {"engine.program", "server.port", "search.space.hicache_size.choices"} <= set(KEYS)
    assert {"tracking.heartbeat_interval", "worker.slots", "preflight"} <= set(KEYS)
    assert outcome("server.port", []) == "accepted"  # the default passes every check


def test_a_huge_gpu_count_is_refused_before_any_list_of_gpus_is_built():
    # hardware.gpus=2**31 once passed every check and then built a list of 2**31 GPU ids
    for value in ("2147483648", "9223372036854775808", "0", "true"):
        assert outcome("hardware.gpus", [f"hardware.gpus={value}"]) == "refused"


SETTINGS = {
    "deadline": None,
    "derandomize": True,  # the same examples on every run: CI is reproducible
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    "database": None,
}


@settings(max_examples=800, **SETTINGS)
@given(key=st.sampled_from(KEYS), value=bad_values)
def test_bad_values_are_accepted_or_refused_naming_the_key(key, value):
    TRIED["fast"] += 1
    outcome(key, [f"{key}={render(value)}"])


@settings(max_examples=10, **SETTINGS)
@given(key=st.sampled_from(KEYS), value=bad_values)
def test_bad_values_through_hydras_compose_api(key, value):
    TRIED["compose"] += 1
    outcome(key, [f"{key}={render(value)}"], full_compose=True)


# A few through the CLI: a well-typed value out of range is the sweeper's refusal (exit 2, before
# anything starts); a wrong type is Hydra's own (exit 1). Neither shows a traceback.
CLI = [
    ("server.port", "80", 2),
    ("benchmark.concurrency", "[]", 2),
    ("search.space.speculative_num_steps.low", "-3", 2),
    ("engine.clock_scale", "0", 2),
    ("model.tp", "'four; rm -rf /'", 1),
]


@pytest.mark.e2e
@pytest.mark.parametrize(("key", "value", "code"), CLI)
def test_bad_values_through_the_cli_are_refused_before_any_launch(tmp_path, key, value, code):
    argv = [sys.executable, "sweep.py", "-m", f"tracking.dir={tmp_path}"]
    argv += [f"server.port={free_port()}", "preflight=true", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    TRIED["cli"] += 1
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    assert key.rsplit(".", 1)[-1] in out and "Traceback" not in out
    assert not list(tmp_path.rglob("server.log")), "a server was launched"


def teardown_module() -> None:
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "bad_inputs_tried": TRIED["fast"] + TRIED["compose"] + TRIED["cli"],
        "tracebacks": TRIED["failed"],
        "keys": len(KEYS),
        **dict(TRIED),
    }
    (out / "bad_input.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"\nbad input: {json.dumps(record)}")


def test_render_round_trips_through_hydras_grammar():
    for value in [None, "a b", "'", "$(id)", [1, "x"], {"a": -1}, math.inf, 1e308, -0.0]:
        parsed = PARSER.parse_overrides([f"k={render(value)}"])[0].value()
        if isinstance(parsed, list | dict):
            parsed = OmegaConf.to_container(OmegaConf.create({"v": parsed}))["v"]
        assert parsed == value or (isinstance(value, ListConfig))
