# Each target sets up .venv with what it needs, again when pyproject.toml changed or the venv is
# missing: the runtime (`pip install -e .`, STAMP) for the sweep and its everyday commands, and the
# test stack on top of it (`.[dev]`: pytest, ruff, import-linter, torch for the drafter's deep
# check...; DEV_STAMP) for `make test`, `make lint` and `make bench`. A `make test` after a
# `make sweep` only adds what the runtime lacks.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

COMPAT := .venv-compat
# SGLang's own argument parser without its GPU stack (shared/reference/install-notes.md): the
# wheel without dependencies, torch's CPU wheel and the pure-Python modules its parser imports,
# plus transformers (SGLang's pin) for its bench_serving's tokenizer (tests/compat/stubs shims
# the rest: sweep/compat/bench_serving.py).
COMPAT_DEPS := numpy orjson psutil pybase64 requests packaging pillow starlette msgspec pydantic \
	pyzmq tqdm ipython aiohttp transformers==5.19.0

REAL := .venv-real
TINY := .tiny-models

.PHONY: sweep test compat compat-env real-sglang-env tiny-models real-sweep lint bench bench-smoke \
	ui screenshots clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "installing specsweep's runtime into $(VENV) (about a minute from a local mirror, README's Quickstart; pip lists each package as it goes)"
	$(PY) -m pip install --progress-bar off -e .
	touch $(STAMP)

# On top of the runtime, so a pyproject.toml change reinstalls both, in this order.
$(DEV_STAMP): $(STAMP)
	@echo "adding the test stack (the dev extra) to $(VENV)"
	$(PY) -m pip install --progress-bar off -e '.[dev]'
	touch $(DEV_STAMP)

## The main job: an Optuna sweep over the (simulated) reference deployment.
sweep: $(STAMP)
	$(PY) sweep.py -m $(ARGS)

## The whole test suite (what CI runs): lint, the import contracts (.importlinter), the tests,
## then every benchmark's smoke form (bench-smoke).
test: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest --ignore=tests/benchmarks
	$(MAKE) bench-smoke

## Every benchmark's smoke form (`--smoke`: its whole path in seconds, its own checks enforced),
## one test each, verbose so the log names every benchmark that ran (tests/benchmarks).
bench-smoke: $(DEV_STAMP)
	$(PY) -m pytest -v tests/benchmarks

## Every launch command the shipped configs produce, parsed by SGLang 0.5.23's own parser (and
## the simulator's, which must agree), then SGLang's own bench_serving against the simulator on
## the native and OpenAI APIs. CI runs it after the tests.
compat: $(STAMP) $(COMPAT)/.installed
	$(PY) -m sweep.compat --python $(COMPAT)/bin/python --bench --json benchmarks/out/compat.json

## Only the compat environment (.venv-compat), which tests/compat needs: CI builds it before
## `make test`, so those tests run there (under CI=true a skip in tests/compat is a failure).
## A fresh build took 169 s (about 3 minutes) on a 2-core dev machine (torch's CPU wheel, SGLang
## without dependencies, transformers); later runs find it built.
compat-env: $(COMPAT)/.installed

$(COMPAT)/.installed:
	test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/bin/python -m pip install --quiet torch==2.13.0
	$(COMPAT)/bin/python -m pip install --quiet --no-deps sglang==0.5.23
	$(COMPAT)/bin/python -m pip install --quiet $(COMPAT_DEPS)
	touch $@

## Real SGLang 0.5.23 on a CPU (.venv-real), which tests/real runs as the engine (docs/real-sglang.md):
## torch's CPU wheel, then every package of tests/real/requirements.txt pinned and without
## dependency resolution, then the import-only stand-ins for torchvision and sgl_kernel
## (tests/real/standins, on the venv's path through a .pth file). CI builds it before `make test`,
## as it builds .venv-compat; later runs find it built (rebuilt when the pins change).
real-sglang-env: $(REAL)/.installed

$(REAL)/.installed: tests/real/requirements.txt
	test -x $(REAL)/bin/python || $(PYTHON) -m venv $(REAL)
	$(REAL)/bin/python -m pip install --quiet --upgrade pip
	$(REAL)/bin/python -m pip install --quiet torch==2.13.0
	$(REAL)/bin/python -m pip install --quiet --no-deps -r tests/real/requirements.txt
	echo "$(abspath tests/real/standins)" > \
		"$$($(REAL)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/specsweep-standins.pth"
	cd /tmp && $(abspath $(REAL))/bin/python -c "import sglang.launch_server, torchvision, sgl_kernel"
	touch $@

## The tiny target model and EAGLE-3 drafter the real engine serves (tools/build_tiny_models.py:
## built here, no download; rebuilt when the builder or its corpus changes).
tiny-models: $(TINY)/.built

$(TINY)/.built: tools/build_tiny_models.py harness/data/prompts.jsonl | $(REAL)/.installed
	nice -n 5 $(REAL)/bin/python tools/build_tiny_models.py --out $(TINY)
	touch $@

## The sweep on real SGLang on this CPU (experiment=real_cpu: the tiny models, a baseline measured
## end to end, speculative trials this engine build cannot start here). ARGS as for `make sweep`.
real-sweep: $(STAMP) $(REAL)/.installed $(TINY)/.built
	$(PY) sweep.py -m experiment=real_cpu $(ARGS)

lint: $(DEV_STAMP)
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports

## Every benchmark in benchmarks/, full form (tables on the console and in docs/results/, JSON in
## benchmarks/out/).
## Each runs whatever the one before it found (sim_calibration exits 1 on its documented held-out
## misses); the target fails at the end, naming those whose checks failed.
bench: $(DEV_STAMP)
	@failed=""; for b in benchmarks/[!_]*.py; do echo "== $$b"; $(PY) $$b || failed="$$failed $$b"; done; \
	if [ -n "$$failed" ]; then echo "checks failed:$$failed"; exit 1; fi

## MLflow UI on the local results (http://127.0.0.1:5000). One worker, no job runner: starts in
## seconds with ~0.5 GB instead of `mlflow ui`'s ~15 processes.
ui: $(STAMP)
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(VENV)/bin/mlflow server \
		--backend-store-uri sqlite:///results/mlflow.db --host 127.0.0.1 --port 5000 --workers 1

## docs/img's screenshots of MLflow's UI on a results folder (RESULTS=..., default results): the
## study's view as a list and as charts, and the experiment as MLflow opens it without the link.
## Starts `make ui`'s server on a free port and headless Chromium (Debian's, apt-get installed when
## missing; root). tools/ui_screenshots.py says more.
screenshots: $(STAMP)
	$(PY) tools/ui_screenshots.py --results $(or $(RESULTS),results) --out docs/img

clean:
	rm -rf results outputs multirun .pytest_cache $(COMPAT) $(REAL) $(TINY)
