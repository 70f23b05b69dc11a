"""`python tests/compat/bench_serving.py ARGS`: SGLang's own `python -m sglang.bench_serving` in
the compat environment (SGLang without its GPU stack), run by `python -m sweep.compat --bench`.

SGLang 0.5.23's `benchmark/serving.py` imports one constant, `FAKE_BOOTSTRAP_HOST`, from
`sglang.srt.disaggregation.utils`, whose imports pull in torchvision and the model configs; this
shim provides that module with the constant copied from the source (line 53: "2.2.2.2") and then
runs bench_serving unchanged. Everything else bench_serving imports is its own.
"""

import runpy
import sys
import types

_utils = types.ModuleType("sglang.srt.disaggregation.utils")
_utils.FAKE_BOOTSTRAP_HOST = "2.2.2.2"  # 0.5.23 sglang/srt/disaggregation/utils.py
sys.modules["sglang.srt.disaggregation.utils"] = _utils

if __name__ == "__main__":
    sys.argv[0] = "sglang.bench_serving"
    runpy.run_module("sglang.benchmark.serving", run_name="__main__", alter_sys=True)
