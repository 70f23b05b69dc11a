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


def token_text(seed: int, index: int, thinking: bool) -> str:
    words = _THINK if thinking else _ANSWER
    return words[(seed + index * 7919) % len(words)]
