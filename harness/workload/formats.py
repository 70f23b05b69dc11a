"""Users' prompt sets in the formats they already have, each error naming the file, the line
and the fix:

- JSONL of `{"prompt": "..."}` (one user turn),
- JSONL of OpenAI chat `{"messages": [{"role", "content"}, ...]}` (system prompts, earlier
  assistant turns),
- ShareGPT conversations, as JSON (a list) or JSONL: `{"conversations": [{"from": "human" |
  "gpt" | "system", "value": "..."}]}`. The prompt is the conversation up to its last human
  turn; what the model said after it is the answer to be generated, so it is dropped.

Each record may carry an `id` (default: `line-N`, or `item-N` in a JSON list) and a `category`.
"""

from __future__ import annotations

import json
from typing import Any

from harness.errors import ConfigError
from harness.workload.prompt import Prompt

ROLES = ("system", "user", "assistant")
# ShareGPT's speaker names (and the variants other exports use) -> OpenAI roles.
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "model": "assistant",
    "system": "system",
}
FORMATS_HINT = (
    "each record needs a non-empty 'prompt' string, a 'messages' list of {role, content} "
    "objects, or a ShareGPT 'conversations' list of {from, value} objects"
)


def parse_file(text: str, source: str) -> list[Prompt]:
    """A JSON list of ShareGPT records, or JSONL of any of the formats."""
    if text.lstrip().startswith("["):
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{source}:{exc.lineno}: not valid JSON ({exc.msg}). A file that starts with "
                "'[' is read as one JSON list of records; for one record per line, use JSONL."
            ) from exc
        return [
            parse_record(r, f"{source}: item {i}", f"item-{i}") for i, r in enumerate(records, 1)
        ]
    return parse_jsonl(text, source)


def parse_jsonl(text: str, source: str) -> list[Prompt]:
    prompts = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{source}:{lineno}: not valid JSON ({exc.msg}). Each line must be one JSON "
                "object (JSONL); a record may not span lines."
            ) from exc
        prompts.append(parse_record(record, f"{source}:{lineno}", f"line-{lineno}"))
    return prompts


def parse_record(record: Any, where: str, default_id: str) -> Prompt:
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: not a JSON object: {FORMATS_HINT}.")
    if "messages" in record:
        messages = _openai_messages(record["messages"], where)
    elif "conversations" in record:
        messages = _sharegpt_messages(record["conversations"], where)
    elif isinstance(record.get("prompt"), str) and record["prompt"].strip():
        messages = [{"role": "user", "content": record["prompt"]}]
    else:
        raise ConfigError(f"{where}: {FORMATS_HINT}.")
    category = record.get("category", "")
    if not isinstance(category, str):
        raise ConfigError(f"{where}: 'category' must be a string, got {category!r}.")
    return Prompt(id=str(record.get("id", default_id)), messages=tuple(messages), category=category)


def _openai_messages(messages: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise ConfigError(
            f"{where}: 'messages' must be a non-empty list of {{role, content}} objects."
        )
    out = []
    for i, m in enumerate(messages, 1):
        if not (isinstance(m, dict) and "role" in m and "content" in m):
            raise ConfigError(
                f"{where}: 'messages' must be a list of {{role, content}} objects (message {i} "
                f"is {json.dumps(m)[:80]})."
            )
        if m["role"] not in ROLES or not isinstance(m["content"], str):
            raise ConfigError(
                f"{where}: message {i} has role {m['role']!r} and a {type(m['content']).__name__} "
                f"content: use a role of {', '.join(ROLES)} and a string content."
            )
        out.append({"role": m["role"], "content": m["content"]})
    if out[-1]["role"] != "user":
        raise ConfigError(
            f"{where}: the last message is from {out[-1]['role']!r}: a prompt must end with the "
            "user's turn (drop the assistant's answer; it is what the model generates)."
        )
    return out


def _sharegpt_messages(turns: Any, where: str) -> list[dict[str, str]]:
    if not isinstance(turns, list) or not turns:
        raise ConfigError(
            f"{where}: 'conversations' must be a non-empty list of {{from, value}} objects."
        )
    messages = []
    for i, turn in enumerate(turns, 1):
        speaker = turn.get("from") if isinstance(turn, dict) else None
        role = SHAREGPT_ROLES.get(str(speaker).lower()) if speaker is not None else None
        if role is None or not isinstance(turn.get("value"), str):
            raise ConfigError(
                f"{where}: conversation turn {i} is {json.dumps(turn)[:80]}: each turn needs "
                f"'from' (human, gpt or system) and a string 'value'."
            )
        messages.append({"role": role, "content": turn["value"]})
    last_human = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last_human is None:
        raise ConfigError(
            f"{where}: the conversation has no human turn: nothing to prompt the model with."
        )
    return messages[: last_human + 1]
