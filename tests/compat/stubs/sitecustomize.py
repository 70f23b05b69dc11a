"""Import stub for `make compat`: the triton stub beside this file satisfies SGLang's module-level
`import triton`, but torch must not take it for the real package (with transformers installed,
SGLang's import patches load torch._dynamo, which reads triton.language when triton imports).
Python runs this at start-up for any interpreter with this folder on PYTHONPATH."""

try:
    import torch.utils._triton as _triton
except ImportError:  # an environment without torch: nothing to hide triton from
    pass
else:
    _triton.has_triton_package = lambda: False
    _triton.has_triton = lambda: False
