"""specsweep's import-only stand-in for torchvision (tests/real/standins/specsweep_standin.py).

SGLang 0.5.23 imports torchvision while resolving its arguments (vision-language configs via
`srt/multimodal/internvl_utils.py`); a text-only model never calls it. The registry's torchvision
wheels need CUDA torch (`operator torchvision::nms does not exist` on the CPU wheel)."""

import sys

import specsweep_standin

__version__ = "0.0.0+specsweep.standin"
specsweep_standin.install(sys.modules[__name__])
