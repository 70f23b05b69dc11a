"""The lossless check: speculative decoding must not change what a greedy decode says.

With temperature 0 an EAGLE-family drafter only proposes; the target model verifies every token,
so a speculative server's output equals the baseline's token for token, up to numerical noise
(a different batch shape can flip a near-tie late in a long output). A configuration whose
outputs part early is wrong however fast it is: an engine or drafter bug.

The check is its own step, after the measured runs (outside every measured window): the first
`lossless_check` prompts, one at a time, on SGLang's native `/generate`, not streamed, at
temperature 0 with `ignore_eos` and `lossless_max_tokens` new tokens whatever the benchmark's
own sampling. The finished answer carries `text` and `output_ids` in every supported SGLang
(0.5.23 / 0.5.22 / 0.5.1.post3 `managers/tokenizer_manager.py::_handle_batch_output`), so the
token ids are compared; where an answer has no ids, the text is, and the first differing
character is mapped to an approximate token index (its share of the output's tokens).

Every trial writes its outputs to `lossless.jsonl`; a trial given the baseline's file compares
per prompt and records the first divergent token (None: identical).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.workload import Prompt

FILE = "lossless.jsonl"
# A prompt whose output parts from the baseline's before this many tokens flags the trial
# (`outputs_diverge`): numerical noise flips a near-tie late, if at all, not in the first tokens.
DIVERGE_BEFORE_TOKENS = 32


@dataclass
class LosslessOutput:
    prompt_id: str
    text: str
    output_ids: list[int] | None  # None: the server's answer carried no token ids
    error: str | None = None


@dataclass
class Agreement:
    """One prompt against the baseline: `first_divergent_token` None when identical."""

    prompt_id: str
    tokens: int  # compared (the shorter output's length)
    first_divergent_token: int | None
    compared: str  # "output_ids" or "text" (then the index is approximate)


async def collect(
    client: httpx.AsyncClient, prompts: list[Prompt], max_tokens: int
) -> list[LosslessOutput]:
    """Each prompt's greedy output, one request at a time. A failed request is recorded with
    its error, not raised: the check never fails a trial by itself."""
    outputs = []
    for prompt in prompts:
        body = {
            "text": "\n".join(m["content"] for m in prompt.messages),
            "sampling_params": {
                "max_new_tokens": max_tokens,
                "temperature": 0.0,
                "ignore_eos": True,  # both sides produce the whole budget
            },
            "stream": False,
        }
        try:
            response = await client.post("/generate", json=body)
            response.raise_for_status()
            data = response.json()
            if isinstance(data, list):  # a batch answer: SGLang returns a list
                data = data[0]
            ids = data.get("output_ids")
            outputs.append(
                LosslessOutput(
                    prompt.id,
                    str(data.get("text") or ""),
                    [int(t) for t in ids] if isinstance(ids, list) else None,
                )
            )
        except (httpx.HTTPError, ValueError, AttributeError, TypeError) as exc:
            outputs.append(LosslessOutput(prompt.id, "", None, f"{type(exc).__name__}: {exc}"))
    return outputs


def write(path: Path, outputs: list[LosslessOutput]) -> None:
    with path.open("w") as fh:
        for output in outputs:
            fh.write(json.dumps(asdict(output), sort_keys=True) + "\n")


def read(path: Path) -> list[LosslessOutput]:
    with path.open() as fh:
        return [LosslessOutput(**json.loads(line)) for line in fh if line.strip()]


def compare(own: LosslessOutput, reference: LosslessOutput) -> Agreement:
    """Where `own` first parts from `reference`: by token ids when both have them, else by text
    (the index is then the differing character's share of the output's tokens)."""
    if own.output_ids is not None and reference.output_ids is not None:
        a, b = own.output_ids, reference.output_ids
        return Agreement(own.prompt_id, min(len(a), len(b)), _first_difference(a, b), "output_ids")
    a_text, b_text = own.text, reference.text
    tokens = len(own.output_ids or reference.output_ids or []) or max(1, len(a_text) // 4)
    char = _first_difference(a_text, b_text)
    index = None if char is None else int(char * tokens / max(1, len(a_text), len(b_text)))
    return Agreement(own.prompt_id, tokens, index, "text")


def _first_difference(a: Any, b: Any) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def judge(
    own: list[LosslessOutput], reference: list[LosslessOutput]
) -> tuple[list[Agreement], dict[str, float], bool]:
    """Per prompt agreement, the trial's metrics and whether any prompt diverged early."""
    by_id = {r.prompt_id: r for r in reference if r.error is None}
    agreements = [
        compare(o, by_id[o.prompt_id]) for o in own if o.error is None and o.prompt_id in by_id
    ]
    if not agreements:
        return [], {}, False
    agree = [
        a.tokens if a.first_divergent_token is None else a.first_divergent_token for a in agreements
    ]
    diverged = [a for a in agreements if a.first_divergent_token is not None]
    metrics = {
        "lossless_min_agree_tokens": float(min(agree)),
        "lossless_prompts_diverged": float(len(diverged)),
        "lossless_prompts": float(len(agreements)),
    }
    early = any(a.first_divergent_token < DIVERGE_BEFORE_TOKENS for a in diverged)  # type: ignore[operator]
    return agreements, metrics, early
