"""Import stub for `make compat`: SGLang's bench_serving imports Hugging Face `datasets` at module
level for its MMMU dataset only; the random dataset `python -m sweep.compat` uses never calls it."""


def load_dataset(*args, **kwargs):
    raise RuntimeError("Hugging Face datasets is not installed in the compat environment")
