"""Deterministic stand-in text: what a reasoning model's tokens look like, cheaply."""

from __future__ import annotations

import hashlib

_THINK = (
    " Let",
    " me",
    " think",
    " about",
    " this",
    " step",
    " by",
    " step",
    ".",
    " First",
    ",",
    " we",
    " need",
    " the",
    " value",
    " of",
    " x",
    " so",
    " consider",
    " each",
    " case",
    " carefully",
    " and",
    " check",
    " whether",
    " it",
    " holds",
    " then",
    " compute",
)
_ANSWER = (
    " The",
    " answer",
    " is",
    " therefore",
    " as",
    " shown",
    " above",
    ":",
    " we",
    " get",
    " the",
    " result",
    " by",
    " combining",
    " both",
    " parts",
    ".",
)


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


_VOCAB = _THINK + _ANSWER  # a token id is its index here
VOCAB = tuple(dict.fromkeys(_VOCAB))  # its distinct words (sweep.compat.bench_serving's tokenizer)


def token_id(seed: int, index: int, thinking: bool) -> int:
    """The `index`-th output token of a request whose text is seeded by `seed`. A greedy request
    is seeded by its prompt alone, so it reads the same with and without speculation."""
    words = _THINK if thinking else _ANSWER
    k = (seed + index * 7919) % len(words)
    return k if thinking else len(_THINK) + k


def id_text(token: int) -> str:
    return _VOCAB[token]
