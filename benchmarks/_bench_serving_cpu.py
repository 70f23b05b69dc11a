"""SGLang's own `bench_serving`, run in this process with its CPU time measured: the part of
benchmarks/client_fidelity.py that runs in SGLang's compat env (`make compat`), not specsweep's.

    python benchmarks/_bench_serving_cpu.py CPU_JSON TOKENIZER_DIR -- <bench_serving args>

Writes {"cpu_s", "wall_s"}: process CPU (user + system) and wall seconds of bench_serving's
`benchmark()` coroutine alone (requests, then its metrics), not of importing SGLang or building
the dataset. TOKENIZER_DIR gets a small word-level tokenizer when it has none, so the random
dataset (`--dataset-name random-ids`) needs no download.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import pickle
import sys
import time
import types
import warnings
from pathlib import Path

VOCAB = 4096
# Imported at module level by bench_serving's multimodal datasets and configs, used only by them:
# hollow modules where the compat env lacks them (the random dataset needs none).
HOLLOW = ("datasets", "torchvision", "tvm_ffi", "sentencepiece", "compressed_tensors", "gguf")
# triton: the stub package stands in for it; its submodules (triton.language, ...) are hollow
SUBMODULES_ONLY = ("triton",)
STUBS = Path(__file__).resolve().parent.parent / "tests" / "compat" / "stubs"


def make_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(folder)


class _Anything(type):
    """The type of placeholders for what a hollow module is asked for (types, so isinstance and
    subclassing work): a decorator returns what it decorates, every attribute, item and call
    gives another placeholder."""

    def __getattr__(cls, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        return _placeholder(f"{cls.__name__}()")

    def __getitem__(cls, _key) -> type:
        return cls


def _placeholder(name: str) -> type:
    return _Anything(name, (), {})


class _HollowModule(types.ModuleType):
    """A module of placeholders: importing names from it works, using them does nothing."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _placeholder(f"{self.__name__}.{name}")


class _Hollow(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `names` (and their submodules) as hollow modules."""

    def __init__(self, names: list[str]):
        self.names = names

    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in self.names or (top in SUBMODULES_ONLY and "." in fullname):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _HollowModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


def main() -> None:
    out, tokenizer, sep, *args = sys.argv[1:]
    assert sep == "--", __doc__
    if not (Path(tokenizer) / "tokenizer.json").is_file():
        make_tokenizer(Path(tokenizer))
    # SGLang imports triton at module level, so the compat env has an import stub for it
    # (tests/compat/stubs, as sweep/compat/parser_check.py uses it); torch and transformers must not
    # see that stub (they would import its backends): they look for triton first, then the stub goes
    # in.
    import torch._dynamo  # noqa: F401
    import transformers  # noqa: F401
    from transformers.utils import import_utils

    import_utils.is_triton_available()
    sys.path.insert(0, str(STUBS))
    import triton  # the stub: anything else asked of it is a placeholder too

    triton.__getattr__ = _HollowModule("triton").__getattr__  # type: ignore[attr-defined]
    triton.__version__ = getattr(triton, "__version__", "0.0.0")
    missing = [name for name in HOLLOW if importlib.util.find_spec(name) is None]
    sys.meta_path.insert(0, _Hollow(missing))
    if importlib.util.find_spec("dill") is None:  # serialises a logit processor class at import
        sys.modules["dill"] = types.ModuleType("dill")
        sys.modules["dill"].dumps, sys.modules["dill"].loads = pickle.dumps, pickle.loads
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from sglang.benchmark import serving

    inner = serving.benchmark

    async def timed(**kwargs):
        cpu, wall = time.process_time(), time.perf_counter()
        result = await inner(**kwargs)
        spent = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}
        Path(out).write_text(json.dumps(spent) + "\n")
        return result

    serving.benchmark = timed  # run_benchmark calls the module's `benchmark`
    sys.argv = ["bench_serving", "--tokenizer", tokenizer, *args]
    serving.cli_main()


if __name__ == "__main__":
    main()
