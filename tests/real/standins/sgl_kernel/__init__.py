"""specsweep's import-only stand-in for sgl_kernel (tests/real/standins/specsweep_standin.py).

SGLang 0.5.23 imports `copy_all_layer_kv_cache_cpu` from it at module level on a CPU
(`kernels/ops/kvcache/cache_move.py`) and calls it only when a speculative server creates its
KV pools; the registry has no CPU build of it (no CPU wheel, no sdist)."""

import sys

import specsweep_standin

__version__ = "0.0.0+specsweep.standin"
specsweep_standin.install(sys.modules[__name__])
