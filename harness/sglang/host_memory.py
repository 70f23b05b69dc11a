"""What SGLang holds in host memory: the checkpoint it loads (through the page cache) and the
HiCache host pool, as read in the 0.5.23 wheel's source (paths under `sglang/srt/`).

The checkpoint. With `--load-format auto`, `DefaultModelLoader._prepare_weights`
(`model_loader/loader.py`) loads a folder's `*.safetensors` (only those named in
`model.safetensors.index.json` where it exists: `filter_duplicate_safetensors_files`), else its
`*.bin` less the training files (`filter_files_not_needed_for_inference`). Every TP rank reads
every file through safetensors' `safe_open` (`model_loader/weight_utils.py`,
`safetensors_weights_iterator` and the default `buffered_multi_thread_safetensors_weights_iterator`,
which keeps up to 9 files in flight per rank), and its weight loaders copy the rank's share to the
GPU. `safe_open` maps the file: the tensors it hands out are page-cache pages, shared by the ranks
and reclaimable (measured with safetensors 0.8.0: reading a 512 MiB file grew RssFile by 516 MiB
and RssAnon not at all). So host memory does not hold the model: the checkpoint stays in the page
cache between server starts where memory is left beside what the server holds, and is read from
disk again where not. `--weight-loader-disable-mmap` reads whole files into process memory
instead; the sweep does not pass it.

HiCache. `--hicache-size` is GB (10^9 bytes) of host KV pool per rank, allocated pinned when the
server starts (`mem_cache/pool_host/base.py`, `HostKVCache`: `host_size * 1e9 // size_per_token`
tokens). Each rank's pool is checked against its share of the host's available memory less a
10 GiB reserve, `(available - HICACHE_HOST_MEMORY_RESERVE_BYTES) // ranks_per_host`
(`host_memory_budget_bytes`), where available counts reclaimable page cache as free and is bounded
by the cgroup's limit (`mem_cache/host_memory.py`, `available_host_memory_bytes`). A pool that
does not fit stops the server: "Not enough host memory available. Requesting ... GB but only have
... GB free. Please reduce the size of the hierarchical cache."
"""

from __future__ import annotations

import json
from pathlib import Path

HICACHE_UNIT_BYTES = 10**9  # --hicache-size is in GB
HICACHE_RESERVE_BYTES = 10 * 2**30  # HICACHE_HOST_MEMORY_RESERVE_BYTES, kept free beside the pools
INDEX = "model.safetensors.index.json"
TRAINING_FILES = ("training_args.bin", "optimizer.bin", "optimizer.pt", "scheduler.pt", "scaler.pt")


def weight_files(folder: Path) -> tuple[str, list[Path]]:
    """The files `--load-format auto` loads from `folder`, and their kind (`safetensors`, `bin`);
    no files: ("", [])."""
    safetensors = sorted(folder.glob("*.safetensors"))
    if safetensors:
        index = folder / INDEX
        if index.is_file():
            named = set(json.loads(index.read_text()).get("weight_map", {}).values())
            safetensors = [f for f in safetensors if f.name in named]
        return "safetensors", safetensors
    bins = [f for f in sorted(folder.glob("*.bin")) if not f.name.endswith(TRAINING_FILES)]
    return ("bin", bins) if bins else ("", [])
