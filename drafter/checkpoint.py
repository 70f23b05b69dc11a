"""Read a checkpoint directory's config and safetensors headers, never its weights.

A safetensors file starts with an 8-byte little-endian header length and a JSON header mapping
each tensor name to its dtype, shape and byte offsets; that is all the checks need. The one
exception is the small draft->target vocabulary map (`d2t`), whose values are read by offset.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

_NUMPY = {"I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8}


class CheckpointError(Exception):
    """The directory is not a readable checkpoint (missing or malformed file)."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    start: int  # absolute byte offset of the data in `file`
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.start


def read_header(path: Path) -> dict[str, TensorInfo]:
    try:
        with path.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            if length > 100_000_000:
                raise CheckpointError(f"{path}: header length {length} is not plausible")
            header = json.loads(fh.read(length))
    except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not a readable safetensors file ({exc})") from exc
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        tensors[name] = TensorInfo(
            name, info["dtype"], tuple(info["shape"]), path, base + start, base + end
        )
    return tensors


def read_config(directory: Path) -> dict[str, Any]:
    path = directory / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (a checkpoint directory needs config.json)")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc


@dataclass
class DrafterCheckpoint:
    directory: Path
    config: dict[str, Any]
    tensors: dict[str, TensorInfo] = field(default_factory=dict)

    @classmethod
    def open(cls, directory: Path) -> DrafterCheckpoint:
        directory = Path(directory)
        if not directory.is_dir():
            raise CheckpointError(f"{directory}: no such checkpoint directory")
        files = sorted(directory.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"{directory}: no *.safetensors file")
        tensors: dict[str, TensorInfo] = {}
        for path in files:
            tensors.update(read_header(path))
        return cls(directory, read_config(directory), tensors)

    def tensor(self, *suffixes: str) -> TensorInfo | None:
        """The tensor called `suffix`, with or without SGLang's legacy/prefixed names."""
        for suffix in suffixes:
            for prefix in ("", "model.", "midlayer.", "model.layers.0.", "layers.0."):
                found = self.tensors.get(prefix + suffix)
                if found is not None:
                    return found
        return None

    def read_ints(self, info: TensorInfo) -> np.ndarray:
        if info.dtype not in _NUMPY:
            raise CheckpointError(f"{info.file}: {info.name} has dtype {info.dtype}, not integer")
        with info.file.open("rb") as fh:
            fh.seek(info.start)
            data = fh.read(info.nbytes)
        return np.frombuffer(data, dtype=_NUMPY[info.dtype])

    @property
    def weights_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors.values())


@dataclass(frozen=True)
class TargetConfig:
    path: Path
    architecture: str
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int

    @classmethod
    def open(cls, directory: Path) -> TargetConfig:
        config = read_config(Path(directory))
        # Multimodal checkpoints (Kimi-K2.5) keep the language model under text_config.
        text = config.get("text_config") or config
        try:
            return cls(
                Path(directory) / "config.json",
                (config.get("architectures") or ["?"])[0],
                int(text["hidden_size"]),
                int(text["num_hidden_layers"]),
                int(text["vocab_size"]),
            )
        except KeyError as exc:
            raise CheckpointError(
                f"{Path(directory) / 'config.json'}: missing {exc.args[0]!r}"
            ) from exc
