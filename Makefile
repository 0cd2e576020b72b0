# Two commands do all the set-up on a fresh machine:
#   make demo   — create .venv, install, run the main job
#   make test   — create .venv, install, run the tests
#   make lint   — ruff and mypy over the code (CI runs it before the tests)
#   make gpu-check — the GPU acceptance run, on a CUDA machine with torch and PyG installed (no .venv)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch 2.13.0 lies on this project's machines' disk; elsewhere pick your build,
# e.g. make test TORCH_SPEC="torch==2.5.1" (install torch first: an unpinned one may be a CUDA build).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.gnnmon-installed

.PHONY: venv demo test lint gpu-check clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,bench,test,lint]"
	touch $(STAMP)

demo: venv
	$(PY) play/flickr_memory.py

test: venv
	$(PY) -m pytest

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# GPU_CHECK_ARGS="--out $$OUT" writes the results file elsewhere; "--dry-run" lists the steps.
gpu-check:
	$(PYTHON) benchmarks/gpu_acceptance.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
