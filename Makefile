# Two commands do all the set-up on a fresh machine:
#   make demo   — create .venv, install, run the main job
#   make test   — create .venv, install, run the tests
#   make lint   — ruff and mypy over the code (CI runs it before the tests)
#   make docs   — the docs site, built strictly into site/ (CI runs it after lint)
#   make build-check — build the sdist and wheel, check them, run the README's first example from the wheel
#   make gpu-check — the GPU acceptance run, on a CUDA machine with torch and PyG installed (no .venv)
#   make mutation — mutmut over the gate, the leak finding and the other modules pyproject.toml lists, then
#                   each one's score against docs/mutation.md's equivalents (slow: tens of minutes; not in make test)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch 2.13.0 lies on this project's machines' disk; elsewhere pick your build,
# e.g. make test TORCH_SPEC="torch==2.5.1" (install torch first: an unpinned one may be a CUDA build).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.gnnmon-installed
DOCS_STAMP := $(VENV)/.gnnmon-docs-installed
DIST_STAMP := $(VENV)/.gnnmon-dist-installed

.PHONY: venv demo test lint docs build-check gpu-check mutation clean

venv: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[all,bench]" --group test --group lint
	touch $(STAMP)

demo: venv
	$(PY) play/flickr_memory.py

# The suite runs in TEST_JOBS processes (pytest-xdist): its slow tests mostly wait on child
# processes, servers and sleeps, so two processes halve it even on two cores. At least 2, at most 4
# (each process holds torch and PyG: about 1 GiB). TEST_JOBS=0 runs it in this process.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 2 ] && n=2; [ $$n -gt 4 ] && n=4; echo $$n)

test: venv
	$(PY) -m pytest -n $(TEST_JOBS) --dist worksteal --durations=15

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --group docs
	touch $(DOCS_STAMP)

# Strict (mkdocs.yml): a broken link or anchor, a page left out of the nav or an unresolved reference
# fails it. NO_MKDOCS_2_WARNING quiets Material's end-of-life banner (docs/docs-site.md says what it is).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

$(DIST_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --group dist
	touch $(DIST_STAMP)

# dist/gnnmon-*.tar.gz and .whl, twine check --strict, their package data, then the wheel in a fresh
# venv (TORCH_SPEC first) runs the README's "Three lines" from an empty folder (.ci/build_check.py).
build-check: $(DIST_STAMP)
	$(PY) .ci/build_check.py --torch "$(TORCH_SPEC)" --python "$(PYTHON)"

# GPU_CHECK_ARGS="--out $$OUT" writes the results file elsewhere; "--dry-run" lists the steps.
gpu-check:
	$(PYTHON) benchmarks/gpu_acceptance.py $(GPU_CHECK_ARGS)

mutation: venv
	$(PY) -m pip install --quiet "mutmut==3.8.1"
	$(PY) .ci/mutation.py --jobs $(TEST_JOBS)

clean:
	rm -rf $(VENV) runs .pytest_cache site dist build mutants
