"""One benchmark prompt: what is sent (OpenAI chat messages), its id and its category."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    id: str
    messages: tuple[dict[str, str], ...]
    category: str = ""  # math, code, long_context, ... ("" when the file names none)
    round: int = 1  # a multi-round user's turn (measure.rounds): 1 is a conversation's first
