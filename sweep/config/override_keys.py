"""Command-line keys the config does not have, refused before Hydra composes anything.

Hydra's own answer to `search.n_trails=5` is "Could not override ... To append to your config use
+search.n_trails=5", and `+` (or `++`) then adds the typo beside the real key: the whole sweep
runs with search.n_trials unchanged. So every key a command line sets, adds or deletes is looked
up in the schema the YAML groups extend (`sweep.config.schema`) first, and one that is not there
is refused with the nearest valid names.

The schema is the right reference because it is the composed config's shape: its dataclasses are
struct, so no group file can add a key they lack, and a key is free-form only below a field typed
as a map, a list or Any (search.space.<param>, search.reference.<param>, hardware.env.<VAR>,
search.enqueue). `hydra.*` is Hydra's own and config-group choices (`experiment=smoke`,
`benchmark/workload=file`) are files, both checked by Hydra itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import typing
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, Union

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import OverrideParseException

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
_FREE = "*"  # below this node any key is valid (a map, a list, Any)


def _schema_type(hint: Any) -> Any:
    """Optional[X] -> X; a map, a list or Any -> _FREE; a dataclass or a leaf type as is."""
    if typing.get_origin(hint) is Union:
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    origin = typing.get_origin(hint)
    if hint is Any or origin in (dict, list) or hint in (dict, list):
        return _FREE
    return hint


def _children(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: _schema_type(hints[f.name]) for f in dataclasses.fields(cls)}


@cache
def free_maps(root: type = SpecsweepConfig) -> tuple[str, ...]:
    """The schema's map-typed fields, where + may add keys (search.space, hardware.env, ...)."""
    maps: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        for f in dataclasses.fields(cls):
            hint = typing.get_type_hints(cls)[f.name]
            if typing.get_origin(hint) is dict:
                maps.append(prefix + f.name)
            elif dataclasses.is_dataclass(hint):
                walk(hint, f"{prefix}{f.name}.")

    walk(root, "")
    return tuple(maps)


@cache
def schema_keys(root: type = SpecsweepConfig) -> tuple[str, ...]:
    """Every dotted key of the schema, nodes and leaves (`search`, `search.sampler.name`)."""
    keys: list[str] = []

    def walk(cls: type, prefix: str) -> None:
        for name, kind in _children(cls).items():
            keys.append(prefix + name)
            if dataclasses.is_dataclass(kind):
                walk(kind, f"{prefix}{name}.")

    walk(root, "")
    return tuple(keys)


def is_known(key: str, root: type = SpecsweepConfig) -> bool:
    """Whether the schema has `key`, or `key` lies below one of its free-form fields."""
    node: Any = root
    for part in key.split("."):
        if node is _FREE:
            return True
        if not dataclasses.is_dataclass(node):
            return False  # below a leaf (search.n_trials.x)
        children = _children(node)
        if part not in children:
            return False
        node = children[part]
    return True


def suggestions(key: str, keys: Iterable[str] | None = None, n: int = 3) -> list[str]:
    """The valid keys nearest to `key`: close as a whole (search.n_trails -> search.n_trials),
    then keys whose last part is close to its last part (benchmark.n_trials -> search.n_trials)."""
    keys = list(schema_keys() if keys is None else keys)
    near = difflib.get_close_matches(key, keys, n=n, cutoff=0.75)
    leaves: dict[str, list[str]] = {}
    for k in keys:
        leaves.setdefault(k.rsplit(".", 1)[-1], []).append(k)
    leaf = key.rsplit(".", 1)[-1]
    for name in difflib.get_close_matches(leaf, list(leaves), n=n, cutoff=0.8):
        near += leaves[name]
    return list(dict.fromkeys(near))[:n]


def unknown_key_message(key: str) -> str:
    """`search.n_trails: no such key; did you mean search.n_trials?`, with a way to look."""
    group = key.split(".", 1)[0]
    near = suggestions(key)
    found = f"did you mean {' or '.join(near)}?" if near else "no key of the config is close to it"
    where = group if is_known(group) else "the whole config"
    look = f"--cfg job --package {group}" if is_known(group) else "--cfg job"
    return (
        f"{key}: no such key; {found} (`python sweep.py {look}` lists {where}; + or ++ adds "
        f"a key only inside a map: {', '.join(free_maps())})"
    )


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


def unknown_keys(overrides: list[str], groups: set[str]) -> list[str]:
    """The keys these overrides set, add or delete that the config has no place for. An override
    Hydra cannot parse is left to Hydra, whose message names it."""
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except OverrideParseException:
        return []
    unknown = []
    for override in parsed:
        key = override.key_or_group
        if key == "hydra" or key.startswith("hydra.") or "/" in key or key in groups:
            continue
        if not is_known(key):
            unknown.append(key)
    return list(dict.fromkeys(unknown))
