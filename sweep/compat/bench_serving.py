"""SGLang's own client against the simulator: `python -m sweep.compat --bench` (and `make compat`).

Starts the simulated reference deployment (EAGLE-3, clock scale 1: bench_serving measures wall
time) and runs SGLang 0.5.23's `python -m sglang.bench_serving` from the compat environment
(`tests/compat/bench_serving.py`, its one import shim) against it on the native API
(`--backend sglang`, /generate), the OpenAI completions API (`sglang-oai`, /v1/completions) and
OpenAI chat (`sglang-oai-chat`). The random dataset needs a tokenizer and a ShareGPT file and no
download: a word-level tokenizer whose vocabulary is the simulator's own words
(`harness.sim.text.VOCAB`, so bench_serving's re-tokenized output counts, and with them its
per-token ITL on the OpenAI backends, match the server's tokens) is built in the compat
environment with `tokenizers` (which transformers brings), and a small ShareGPT-style JSON is
written beside it. A backend
passes when every request succeeded, the server's token count is what was asked (ignore_eos,
fixed lengths) and the output throughput is within THROUGHPUT_BAND of what the simulator's own
model predicts for the same load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.server.command import build_server_command, server_flags
from harness.server.process import Server
from harness.sim.oracle import modelled_load
from harness.sim.text import VOCAB
from harness.spec import EngineSpec, ServerSpec
from sweep.paths import COMPAT_STUBS, ROOT

SHIM = ROOT / "tests" / "compat" / "bench_serving.py"
STUBS = COMPAT_STUBS
BACKENDS = ("sglang", "sglang-oai", "sglang-oai-chat")
PROMPTS, CONCURRENCY, INPUT_LEN, OUTPUT_LEN = 16, 4, 128, 64
THROUGHPUT_BAND = (0.6, 1.4)  # measured / modelled output tok/s: sane, not a calibration
SIM_FLAGS = ("--sim-clock-scale", "1", "--sim-load-s", "1", "--sim-drift", "0")

MAKE_TOKENIZER = """
import json, sys
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = json.loads(sys.argv[2])
vocab = {w: i for i, w in enumerate(["<unk>", "<s>", "</s>", *words])}
tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.Split(Regex(r" ?[A-Za-z]+|[^A-Za-z ]| "), "isolated")
tok.decoder = decoders.Fuse()
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>")
fast.save_pretrained(sys.argv[1])
"""


def reference_server(port: int) -> ServerSpec:
    """The reference deployment with EAGLE-3 (Kimi-K2.5, TP 8), metrics on, at the seeds' 0.85.

    The fraction is set because every sweep launch sets it: left to SGLang 0.5.23 it would be
    0.758 for this model (its multimodal factor), which leaves no KV pool after the weights, so
    the simulator refuses to start there as SGLang does (docs/simulator.md).
    """
    return ServerSpec(
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        port=port,
        trust_remote_code=True,
        reasoning_parser="kimi_k2",
        speculative_algorithm="EAGLE3",
        speculative_draft_model_path="/models/eagle3",
        speculative_num_steps=3,
        speculative_eagle_topk=1,
        speculative_num_draft_tokens=4,
        mem_fraction_static=0.85,
        env=(("NCCL_PROTO", "LL"),),
    )


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(STUBS), "HF_HUB_OFFLINE": "1"}


def prepare(python: str, folder: Path) -> tuple[Path, Path]:
    """(tokenizer folder, ShareGPT-style dataset) for bench_serving's random dataset, offline."""
    tokenizer = folder / "tokenizer"
    subprocess.run(
        [python, "-c", MAKE_TOKENIZER, str(tokenizer), json.dumps(VOCAB)],
        check=True,
        env=_env(),
        capture_output=True,
        timeout=300,
    )
    text = "".join(VOCAB)  # prompts of the tokenizer's own words
    conversation = [{"from": "human", "value": text}, {"from": "gpt", "value": text}]
    dataset = folder / "sharegpt.json"
    dataset.write_text(json.dumps([{"conversations": conversation}] * PROMPTS))
    return tokenizer, dataset


def run_backend(
    python: str, backend: str, base_url: str, tokenizer: Path, dataset: Path, out: Path
) -> tuple[dict, str]:
    """bench_serving's result record for one backend, and what it printed."""
    argv = [
        python,
        str(SHIM),
        *("--backend", backend, "--base-url", base_url, "--model", "m"),
        *("--dataset-name", "random", "--dataset-path", str(dataset)),
        *("--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN)),
        *("--random-range-ratio", "1", "--num-prompts", str(PROMPTS)),
        *("--max-concurrency", str(CONCURRENCY), "--tokenizer", str(tokenizer)),
        *("--output-file", str(out), "--disable-tqdm"),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=600)
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError(f"bench_serving --backend {backend} failed:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text().splitlines()[-1]), proc.stdout


def summary_line(backend: str, result: dict) -> str:
    return (
        f"  {backend:16s} {result['completed']}/{PROMPTS} ok  "
        f"output {result['output_throughput']:7.1f} tok/s  "
        f"TTFT mean {result['mean_ttft_ms']:6.1f} ms p99 {result['p99_ttft_ms']:6.1f} ms  "
        f"ITL mean {result['mean_itl_ms']:5.1f} ms p99 {result['p99_itl_ms']:6.1f} ms"
    )


def check_bench(python: str, port: int) -> tuple[list[str], dict[str, dict]]:
    """(failures, bench_serving's result per backend) against a freshly started simulator."""
    server = reference_server(port)
    engine = EngineSpec(
        name="sim",
        program=(sys.executable, "-m", "harness.sim"),
        ready_timeout_s=120,
        stop_grace_s=10,
        extra_args=SIM_FLAGS,
    )
    command = build_server_command(server, engine)
    prompts = [f"prompt {i} " + "x" * (4 * INPUT_LEN - 60) for i in range(PROMPTS)]
    modelled = modelled_load([*server_flags(server), *SIM_FLAGS], CONCURRENCY, prompts, OUTPUT_LEN)
    failures: list[str] = []
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="specsweep-bench-serving-") as tmp:
        folder = Path(tmp)
        tokenizer, dataset = prepare(python, folder)
        with Server(command, folder / "server.log", ready_timeout_s=120) as srv:
            srv.wait_ready()
            for backend in BACKENDS:
                out = folder / f"{backend}.jsonl"
                result, _ = run_backend(python, backend, command.base_url, tokenizer, dataset, out)
                results[backend] = result
                print(summary_line(backend, result))
                failures += _judge(backend, result, modelled.output_tok_s)
    print(f"  the simulator's model for this load: {modelled.output_tok_s:.1f} output tok/s")
    return failures, results


def _judge(backend: str, result: dict, modelled_tok_s: float) -> list[str]:
    problems = []
    if result["completed"] != PROMPTS:
        problems.append(f"{result['completed']} of {PROMPTS} requests completed")
    if result["total_output_tokens"] != PROMPTS * OUTPUT_LEN:
        problems.append(
            f"{result['total_output_tokens']} output tokens, asked {PROMPTS * OUTPUT_LEN}"
        )
    ratio = result["output_throughput"] / modelled_tok_s
    if not THROUGHPUT_BAND[0] <= ratio <= THROUGHPUT_BAND[1]:
        problems.append(
            f"output {result['output_throughput']:.1f} tok/s is {ratio:.2f}x the simulator's "
            f"model ({modelled_tok_s:.1f})"
        )
    return [f"bench_serving --backend {backend}: {p}" for p in problems]
