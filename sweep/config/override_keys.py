"""Command-line keys the config does not have, refused before Hydra runs the command.

Hydra's own answer to `search.n_trails=5` is "Could not override ... To append to your config use
+search.n_trails=5", and `+` (or `++`) then adds the typo beside the real key: the whole sweep
runs with search.n_trials unchanged. So every key a command line sets, adds or deletes is looked
up in the schema the YAML groups extend (`sweep.config.schema`) first, and one that is not there
is refused with the nearest valid names.

The schema is the composed config's shape: its dataclasses are struct, so no group file can add
a key they lack. Only a map field (search.space, search.reference, hardware.env) takes entries
of any name, each entry of its declared type (search.space.<param> is a ParamConfig, so
search.space.<param>.hgh is refused); lists and Any are free below. Which entries a map has is
the composed config's: a plain override of one it lacks (Hydra accepts new entries only with +)
is checked against the config the command line's group choices compose. `hydra.*` is Hydra's
own and config-group choices (`experiment=smoke`, `benchmark/workload=file`) are files, both
checked by Hydra itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import typing
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple, Union

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException
from omegaconf import DictConfig, OmegaConf

from sweep.config.schema import SpecsweepConfig

# Hydra's flags that take a value: the token after one is that value, never an override.
_VALUE_FLAGS = {
    "-c",
    "--cfg",
    "-cn",
    "--config-name",
    "-cp",
    "--config-path",
    "-cd",
    "--config-dir",
    "-p",
    "--package",
    "--info",
    "--experimental-rerun",
}
_FREE = "*"  # below this node any key is valid (a list, Any, a map of Any)


class _Map(NamedTuple):
    """A Dict[str, X] field: any entry name (+ adds one), each entry an X."""

    value: Any


def _schema_type(hint: Any) -> Any:
    """Optional[X] -> X; Dict[str, X] -> _Map(X); a list or Any -> _FREE; else as is."""
    if typing.get_origin(hint) is Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin = typing.get_origin(hint)
    if origin is dict:
        args = typing.get_args(hint)
        return _Map(_schema_type(args[1]) if len(args) == 2 else _FREE)
    if hint is Any or origin is list or hint in (dict, list):
        return _FREE
    return hint


def _children(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: _schema_type(hints[f.name]) for f in dataclasses.fields(cls)}


def _walk(key: str, root: type) -> tuple[bool, bool]:
    """(whether the schema has `key`, whether its path runs through a map's entry)."""
    node: Any = root
    through_map = False
    for part in key.split("."):
        if node is _FREE:
            return True, through_map
        if isinstance(node, _Map):  # `part` names an entry: the composed config has them
            node, through_map = node.value, True
            continue
        if not dataclasses.is_dataclass(node):
            return False, through_map  # below a leaf (search.n_trials.x)
        children = _children(node)
        if part not in children:
            return False, through_map
        node = children[part]
    return True, through_map


def is_known(key: str, root: type = SpecsweepConfig) -> bool:
    """Whether the schema has `key`, an entry of one of its maps included
    (search.space.<any>.high; search.space.<any>.hgh is not)."""
    return _walk(key, root)[0]


@cache
def free_maps(root: type = SpecsweepConfig) -> tuple[str, ...]:
    """The schema's map fields, where + adds entries (search.space, hardware.env, ...)."""
    maps: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        for name, kind in _children(cls).items():
            if isinstance(kind, _Map):
                maps.append(prefix + name)
            elif dataclasses.is_dataclass(kind):
                walk(kind, f"{prefix}{name}.")

    walk(root, "")
    return tuple(maps)


@cache
def schema_keys(root: type = SpecsweepConfig) -> tuple[str, ...]:
    """Every dotted key of the schema, nodes and leaves (`search`, `search.sampler.name`); a
    map's entries are the composed config's (`composed_keys`)."""
    keys: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        for name, kind in _children(cls).items():
            keys.append(prefix + name)
            if dataclasses.is_dataclass(kind):
                walk(kind, f"{prefix}{name}.")

    walk(root, "")
    return tuple(keys)


def composed_keys(cfg: DictConfig) -> list[str]:
    """Every dotted key of a composed config, its maps' entries included (lists not entered)."""
    keys: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for name, value in node.items():
            keys.append(prefix + str(name))
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}.")

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return keys


def suggestions(key: str, keys: Iterable[str] | None = None, n: int = 3) -> list[str]:
    """The valid keys nearest to `key`, best first: close as a whole (search.n_trails ->
    search.n_trials) or by the last part (benchmark.n_trials -> search.n_trials), only those
    about as close as the best, and never a node `key` lies inside (hardware.env for
    hardware.env.NEWVAR: that one is there already)."""
    keys = list(dict.fromkeys(schema_keys() if keys is None else keys))
    nodes = {k.rsplit(".", 1)[0] for k in keys if "." in k} | set(free_maps())
    leaf = key.rsplit(".", 1)[-1]

    def score(candidate: str) -> float:
        whole = difflib.SequenceMatcher(None, key, candidate).ratio()
        last = difflib.SequenceMatcher(None, leaf, candidate.rsplit(".", 1)[-1]).ratio()
        # a close whole key, or the very name in another group (benchmark.n_trials ->
        # search.n_trials); a merely similar last part only where neither is found
        near_last = 0.85 if last == 1.0 else (0.5 * last if last >= 0.8 else 0.0)
        return max(whole if whole >= 0.75 else 0.0, near_last)

    scored = sorted(
        ((score(k), k) for k in keys if not (k in nodes and key.startswith(k + "."))),
        key=lambda pair: -pair[0],
    )
    best = scored[0][0] if scored else 0.0
    return [k for s, k in scored if s > 0 and s >= best - 0.05][:n]


def unknown_key_message(key: str, near: list[str] | None = None) -> str:
    """`search.n_trails: no such key; did you mean search.n_trials?`, with a way to look."""
    group = key.split(".", 1)[0]
    near = suggestions(key) if near is None else near
    found = f"did you mean {' or '.join(near)}?" if near else "no key of the config is close to it"
    where = group if is_known(group) else "the whole config"
    look = f"--cfg job --package {group}" if is_known(group) else "--cfg job"
    in_map = next((m for m in free_maps() if key.startswith(m + ".")), None)
    entry = key[len(in_map) + 1 :].split(".")[0] if in_map is not None else ""
    if in_map is not None and is_known(key) and key == f"{in_map}.{entry}":  # set without +
        adds = f"a new entry of {in_map} needs a leading +: +{key}=..."
    elif in_map is not None and is_known(key):  # a field of an entry the map lacks
        adds = f"a new entry of {in_map} is added whole: +{in_map}.{entry}={{...}}"
    else:
        adds = f"+ or ++ adds a key only inside a map: {', '.join(free_maps())}"
    return f"{key}: no such key; {found} (`python sweep.py {look}` lists {where}; {adds})"


def config_groups(conf: Path) -> set[str]:
    """The config groups of `conf/` as overrides name them: engine, benchmark/workload, ..."""
    return {str(d.relative_to(conf)) for d in conf.rglob("*") if d.is_dir()}


def command_line_overrides(argv: list[str]) -> list[str]:
    """The override tokens of a Hydra command line (not its flags, nor a flag's value)."""
    tokens, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token.startswith("-"):
            skip = token in _VALUE_FLAGS
        elif "=" in token or token.startswith("~"):
            tokens.append(token)
    return tokens


def extra_config_dirs(argv: list[str]) -> list[Path]:
    """The --config-dir (-cd) folders a command line adds: their groups are groups too."""
    dirs = []
    for flag, value in itertools.pairwise(argv):
        if flag in ("-cd", "--config-dir"):
            dirs.append(Path(value))
    dirs += [Path(t.split("=", 1)[1]) for t in argv if t.startswith("--config-dir=")]
    return [d for d in dirs if d.is_dir()]


def unknown_keys(
    overrides: list[str],
    groups: set[str],
    composed: Callable[[list[str]], list[str] | None] | None = None,
) -> dict[str, list[str]]:
    """The keys these overrides set, add or delete that the config has no place for, each with
    its nearest valid keys. A key the schema has fails only when a plain override (no +) names a
    map entry the composed config lacks (search.space.speculative_num_step.high). `composed`,
    given the group overrides, returns the composed config's keys (None: they do not compose,
    and Hydra says why); it is asked only for such an override or a refused key, whose
    suggestions then include the maps' entries. An override Hydra cannot parse is left to Hydra,
    whose message names it."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException:
        return {}
    choices = [o.input_line for o in parsed if o.key_or_group in groups]
    asked: list[list[str] | None] = []

    def existing() -> list[str] | None:
        if not asked:
            asked.append(composed(choices) if composed is not None else None)
        return asked[0]

    unknown: list[str] = []
    for override in parsed:
        key = override.key_or_group
        if key == "hydra" or key.startswith("hydra.") or "/" in key or key in groups:
            continue
        known, through_map = _walk(key, SpecsweepConfig)
        adds = override.is_add() or override.is_force_add()
        new_entry = through_map and not adds and key not in (existing() or [key])
        if not known or new_entry:
            unknown.append(key)
    return {key: suggestions(key, [*(existing() or []), *schema_keys()]) for key in unknown}
