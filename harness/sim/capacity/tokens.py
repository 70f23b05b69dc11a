"""Stable token ids for prompts, so the radix cache sees shared prefixes as SGLang would.

A prompt is a string (/v1/completions, /generate) or a chat message list (/v1/chat/completions).
Messages are rendered by a fixed template (a role header, the content, an end marker per message,
then the assistant header), as a chat template does, so a conversation's next turn starts with
exactly the tokens of its previous turns. Text becomes ids in fixed windows of `CHARS_PER_TOKEN`
characters from the start (a window's id is its CRC-32): two prompts share ids as far as their
text agrees, window by window, which is what a prefix cache needs of a tokenizer. The count
keeps the simulator's rule from before (`len(text) // 4 + 12`): `TEMPLATE_TOKENS` fixed ids lead.
"""

from __future__ import annotations

import zlib
from typing import Any

CHARS_PER_TOKEN = 4
TEMPLATE_TOKENS = 12  # the chat template's / BOS overhead the simulator has always counted
_TEMPLATE_IDS = tuple(range(1, TEMPLATE_TOKENS + 1))
VOCAB_SIZE = 163_840  # Kimi-K2's vocabulary: ids are drawn below it


def render(prompt: str | list[dict[str, Any]]) -> str:
    """The text the model sees: a string as is; messages through the fixed template."""
    if isinstance(prompt, str):
        return prompt
    parts = []
    for message in prompt:
        if not isinstance(message, dict):
            continue
        parts.append(f"<|im_{message.get('role', 'user')}|>{message.get('content', '')}<|im_end|>")
    parts.append("<|im_assistant|>")
    return "".join(parts)


def prompt_ids(text: str, count: int | None = None) -> tuple[int, ...]:
    """`count` ids (default: `len(text) // 4 + 12`) for `text`: the template ids, then one per
    window; a `count` beyond the text (prompts given as token ids) repeats the windows' pattern
    with the position mixed in, so it stays a deterministic function of the text."""
    n = max(1, count if count is not None else len(text) // CHARS_PER_TOKEN + TEMPLATE_TOKENS)
    data, w = text.encode(), CHARS_PER_TOKEN
    span = VOCAB_SIZE - TEMPLATE_TOKENS - 1
    ids = list(_TEMPLATE_IDS[:n])
    base = TEMPLATE_TOKENS + 1
    ids += [base + zlib.crc32(data[i : i + w]) % span for i in range(0, len(data), w)]
    ids = ids[:n]
    i = 0
    while len(ids) < n:  # beyond the text: the position decides
        ids.append(TEMPLATE_TOKENS + 1 + zlib.crc32(b"\x00%d" % i) % span)
        i += 1
    return tuple(ids)
