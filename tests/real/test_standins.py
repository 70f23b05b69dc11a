"""The real-engine environment's stand-ins for torchvision and sgl_kernel (tests/real/standins):
on the environment's path, importable down to any submodule, any name read from them allowed,
every call refused with what was called, and counted in the process and in the call log."""

from __future__ import annotations

import json
import os
import subprocess

from tests.real.conftest import STANDIN_ENV

PROBE = """
import json
import torchvision.transforms as T
from torchvision.transforms.functional import InterpolationMode
from sgl_kernel import copy_all_layer_kv_cache_cpu
import specsweep_standin

mode = InterpolationMode.BICUBIC  # read at import time by SGLang: allowed, not a call
errors = []
for call in (lambda: T.Compose([]), lambda: copy_all_layer_kv_cache_cpu(1, 2)):
    try:
        call()
    except specsweep_standin.StandInCalled as exc:
        errors.append(str(exc))
print(json.dumps({"errors": errors, "calls": specsweep_standin.CALLS, "mode": repr(mode)}))
"""


def test_the_stand_ins_import_and_refuse_every_call(real_env, tmp_path):
    log = tmp_path / "calls.jsonl"
    env = {**os.environ, STANDIN_ENV: str(log)}
    out = subprocess.run(
        [str(real_env), "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    called = ["torchvision.transforms.Compose", "sgl_kernel.copy_all_layer_kv_cache_cpu"]
    assert seen["calls"] == called
    assert seen["mode"] == "<stand-in torchvision.transforms.functional.InterpolationMode.BICUBIC>"
    assert "no CPU build of sgl_kernel" in seen["errors"][1]
    assert [json.loads(line)["name"] for line in log.read_text().splitlines()] == called
