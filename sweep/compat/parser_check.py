"""python -m sweep.compat --python PATH: does SGLang's own parser accept what specsweep launches?

Builds the launch command of every shipped configuration (each model, drafter, hardware, server,
search and experiment preset; each search space at its bounds and at seeded random points; the
baseline), then parses each with SGLang's `ServerArgs.add_cli_args` in the Python at PATH (an
environment with SGLang installed: `make compat` builds one without GPU packages) and with the
simulator's parser, and checks the two agree on every flag given. Exit status 1 on any
disagreement, with the command and SGLang's own error.

With `--bench` it then runs SGLang's own `bench_serving` from that environment against the
simulator on the native and OpenAI APIs (`sweep.compat.bench_serving`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import optuna
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.server.command import server_flags
from harness.server.flags import parse_with_sglang
from harness.sglang.adaptive import ADAPTIVE_DEFAULT_CONFIG
from harness.sglang.surfaces import CURRENT, VERSIONS
from harness.sim.cli import build_parser
from sweep.adaptive.config_file import Measured, Study, measured_config
from sweep.adaptive.sglang_check import disagreements, validate_with_sglang
from sweep.config.schema import register as register_schema
from sweep.config.specs import build_trial_spec
from sweep.launch.parse_check import sim_parser_problems
from sweep.paths import COMPAT_STUBS, CONF
from sweep.study.search.space import SearchSpace

STUBS = COMPAT_STUBS
RANDOM_POINTS = 8


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def _space_points(space: SearchSpace, seed: int) -> Iterator[dict]:
    """Each space at its lower and upper bounds, then at seeded random points."""
    for pick in (0, -1):
        fixed = {}
        for name, p in space.params.items():
            fixed[name] = p.choices[pick] if p.type == "categorical" else (p.low, p.high)[pick]
            if p.type == "int":
                fixed[name] = int(fixed[name])
        yield space.suggest(optuna.trial.FixedTrial(fixed))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    for _ in range(RANDOM_POINTS):
        yield space.suggest(study.ask())


def shipped_commands(version: str = CURRENT) -> list[tuple[str, list[str]]]:
    """(label, SGLang flags) for every shipped configuration, de-duplicated."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seen: dict[tuple[str, ...], str] = {}
    # engine=sim: the same server flags, without engine=sglang's checks that model and drafter
    # directories exist on this machine. Only SGLang's flags are compared (no --sim-* flags).
    base = ["engine=sim", f"engine.sglang_version={version}", "preflight=false"]
    # The default composition, then each option of each group on its own (a flag comes from one
    # group; the Cartesian product adds time, not flags), then each experiment preset.
    presets: list[list[str]] = [[]]
    for group in ("model", "drafter", "hardware", "server", "search"):
        presets += [[f"{group}={option}"] for option in _options(group)]
    presets.append(["model=llama31_8b", "hardware=1x_h100", "drafter=llama31_8b_eagle3"])
    presets += [[f"experiment={e}"] for e in _options("experiment")]
    adaptive = [f"server.{k}=null" for k in ("speculative_num_steps", "speculative_eagle_topk",
                                             "speculative_num_draft_tokens")]  # fmt: skip
    if version == CURRENT:  # the 0.5.1 surface has no adaptive flags (harness.sglang)
        example = Path(tempfile.mkdtemp()) / "adaptive_config.json"
        example.write_text(json.dumps(example_config()))
        presets.append(["server.speculative_adaptive=true", *adaptive])
        presets.append(["server.speculative_adaptive=true", *adaptive,
                        f"server.speculative_adaptive_config={example}"])  # fmt: skip
    register_schema()  # the structured configs config.yaml starts from
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        for i, preset in enumerate(presets):
            cfg = compose("config", overrides=[*base, *preset])
            try:
                _add(
                    seen,
                    " ".join(preset or ["defaults"]) + " baseline",
                    _baseline(cfg, base, preset),
                )
            except ConfigError:
                continue  # e.g. a TP-8 model on the one-GPU box: refused long before any launch
            if cfg.drafter.path is None:
                continue
            if cfg.server.speculative_adaptive:  # SGLang chooses the steps (topk 1)
                label = " ".join(preset)
                _add(seen, label, compose("config", overrides=[*base, *preset, "trial.role=trial"]))
                continue
            space = SearchSpace.from_config(cfg.search.space)
            for values in _space_points(space, seed=i):
                overrides = [*base, *preset, *space.overrides(values), "trial.role=trial"]
                label = " ".join([*preset, *space.overrides(values)])
                _add(seen, label, compose("config", overrides=overrides))
    return [(label, list(flags)) for flags, label in seen.items()]


def _baseline(cfg: DictConfig, base: list[str], preset: list[str]) -> DictConfig:
    plain = [o for o in preset if not o.startswith("server.speculative_")]  # no drafter to adapt
    return compose("config", overrides=[*base, *plain, "drafter=none", "trial.role=baseline"])


def _add(seen: dict, label: str, cfg: DictConfig) -> None:
    spec = build_trial_spec(cfg)
    seen.setdefault(tuple(server_flags(spec.server, spec.engine.sglang_version)), label)


def _given_dests(flags: list[str], version: str) -> dict[str, str]:
    """flag -> argparse dest, for the flags actually given (as the simulator's parser maps them)."""
    actions = build_parser(version)._option_string_actions
    return {f: actions[f].dest for f in flags if f.startswith("--") and f in actions}


def example_config() -> dict:
    """A measured adaptive config (sweep.adaptive.config_file) from a fixed example study."""

    def row(name, role, steps, levels, accept):
        levels = {c: (m, 5.0) for c, m in levels.items()}
        return Measured(name, Path(name), role, steps, 1, False, levels, accept)

    study = Study(
        Path("example"),
        row("baseline", "baseline", None, {1: 100, 8: 400, 64: 1500}, {}),
        [
            row("t3", "trial", 3, {1: 140, 8: 450, 64: 1400}, {1: 2.4, 8: 2.3, 64: 2.2}),
            row("t5", "trial", 5, {1: 142, 8: 420, 64: 1300}, {1: 2.9, 8: 2.7, 64: 2.6}),
        ],
    )
    return measured_config(study, [1, 8, 64])


def check_adaptive(python: str) -> list[str]:
    """SGLang's own loader on its default and on a measured file: what it makes of each must be
    what specsweep (and the simulator's policy) read from them."""
    failures = []
    default = {k: dict(v) for k, v in ADAPTIVE_DEFAULT_CONFIG.items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "adaptive_config.json"
        path.write_text(json.dumps(example_config()))
        for label, config, file in (
            ("default", default, None),
            ("measured", example_config(), path),
        ):
            try:
                view = validate_with_sglang(python, file)
            except RuntimeError as exc:
                failures.append(f"adaptive config ({label}): {exc}")
                continue
            failures += [f"adaptive config ({label}): {p}" for p in disagreements(config, view)]
            if label == "default" and view["default"] != default:
                failures.append(f"SGLang's DEFAULT_ADAPTIVE_CONFIG is {view['default']}, "
                                f"harness.sglang's {default}")  # fmt: skip
    print("adaptive configs checked with SGLang's loader: default and measured")
    return failures


def check(python: str, version: str = CURRENT) -> list[str]:
    commands = shipped_commands(version)
    results = parse_with_sglang(python, [flags for _, flags in commands], extra_path=str(STUBS))
    failures = []
    for (label, flags), result in zip(commands, results, strict=True):
        if result["error"]:
            failures.append(f"SGLang refuses [{label}]: {result['error']}\n  {' '.join(flags)}")
            continue
        sim = sim_parser_problems(flags, version)
        if sim:
            failures.append(f"the simulator refuses [{label}]: {sim[0]}")
            continue
        ns = vars(build_parser(version).parse_args([*flags, "--sim-sglang-version", version]))
        for flag, dest in _given_dests(flags, version).items():
            theirs = result["args"].get(dest, "<missing>")
            if ns[dest] != theirs:
                failures.append(
                    f"[{label}] {flag}: SGLang parses {theirs!r}, the simulator {ns[dest]!r}"
                )
    print(f"{len(commands)} distinct launch commands from the shipped configs, SGLang {version}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweep.compat", description=__doc__)
    parser.add_argument("--python", required=True, help="a Python with SGLang installed")
    parser.add_argument("--sglang-version", default=CURRENT, choices=VERSIONS)
    parser.add_argument("--json", type=Path, help="write the commands and verdicts here")
    parser.add_argument(
        "--bench",
        action="store_true",
        help="also run SGLang's bench_serving against the simulator (native and OpenAI APIs)",
    )
    args = parser.parse_args(argv)
    failures = check(args.python, args.sglang_version)
    if args.sglang_version == CURRENT:
        failures += check_adaptive(args.python)
    bench: dict[str, dict] = {}
    if args.bench:
        from harness.server.procs import free_port
        from sweep.compat.bench_serving import check_bench

        print("SGLang's bench_serving against the simulator:")
        bench_failures, bench = check_bench(args.python, free_port())
        failures += bench_failures
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"failures": failures, "bench_serving": bench}, indent=2))
    for failure in failures:
        print(failure, file=sys.stderr)
    print("compat: " + ("FAILED" if failures else "every command parses in SGLang and agrees"))
    return 1 if failures else 0
