# Two commands do all set-up on a fresh machine:
#   make book   -> _build/html/index.html, every notebook executed
#   make test   -> unit tests of sigprop + every notebook through nbval
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of PyTorch is installed only where the venv has none (Colab and GPU users keep theirs). On the
# public index a plain `torch` on Linux is the CUDA build (several GB): the CPU wheel index is searched too, and
# its +cpu build wins. For a CUDA build: make TORCH_INDEX=https://download.pytorch.org/whl/cu128 venv
# One retry: where that index cannot be reached (an offline mirror of PyPI), pip's five retries with back-off
# cost about ten seconds for each of torch's dependencies (two minutes here) before pip uses the other index.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# Assignment masters (book/assignments) are graded by tests/test_assignments.py, not run by nbval.
NOTEBOOKS := $(shell find chapters book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -not -path 'book/assignments/*' | sort)
# The notebooks make book builds from the pages (book/notebooks.py: what Colab, Binder and the download button
# serve), run by nbval too; one whose code cells are its page's is executed through its page (.ci/nbval_built.py)
BUILT_NOTEBOOKS = $(shell find _build/html/_notebooks -name '*.ipynb' 2>/dev/null | LC_ALL=C sort)

.PHONY: book test test-unit test-notebooks claims ledger fullcheck bench bench-record records assignments release venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q --retries 1 "$(TORCH_SPEC)" --extra-index-url "$(TORCH_INDEX)"
	$(PY) -m pip install -q -e ".[book,test,assignments]"
	touch $@

# Notebook outputs are cached in _build/.jupyter_cache (execute_notebooks: cache in _config.yml),
# keyed on each notebook's code; a change to lib/sigprop (which that key cannot see) empties it.
book: venv
	@sum=$$(find lib/sigprop -type f \( -name '*.py' -o -name '*.json' \) -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-64); \
	if [ -d _build/.jupyter_cache ] && [ "$$sum" != "$$(cat _build/.sigprop-source 2>/dev/null)" ]; then \
		echo "lib/sigprop changed since the last build: re-executing every notebook"; rm -rf _build/.jupyter_cache; fi; \
	mkdir -p _build && echo "$$sum" > _build/.sigprop-source
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "open _build/html/index.html"

test: test-unit test-notebooks

test-unit: venv
	$(PY) -m pytest tests -q -p no:cacheprovider

test-notebooks: venv
	PYTHONPATH=".ci$${PYTHONPATH:+:$$PYTHONPATH}" $(PY) -m pytest -p nbval_built --nbval-lax --nbval-current-env \
		--nbval-cell-timeout=900 -q -p no:cacheprovider $(NOTEBOOKS) $(BUILT_NOTEBOOKS)

claims: venv
	$(PY) -m sigprop.claims

# Re-run the ledger and rewrite its committed record (lib/sigprop/claims/records/*.json), which the book quotes
ledger: venv
	$(PY) -m sigprop.claims --record

# Every chapter's Monte Carlo core outside Jupyter, with times, memory and agreement
# (make fullcheck SIZE=full DEVICE=cuda on a GPU; make test runs the quick size)
SIZE ?= quick
DEVICE ?= cpu
fullcheck: venv
	$(PY) -m sigprop.fullcheck --size $(SIZE) --device $(DEVICE)

# Speed and memory benchmarks (prints a table; --json FILE writes it)
bench: venv
	$(PY) -m sigprop.bench

# Re-record the run the benchmarks page shows: the table on a quiet machine, then every page beside a
# CPU-bound process (about 40 min on 2 cores)
bench-record: venv
	$(PY) -m sigprop.bench --pages --load --json lib/sigprop/bench/records/bench_record.json

# Re-record the long experiments the book replays (lib/sigprop/experiments/records): the training regimes
# (~25 min on 2 CPU cores; minutes on a GPU), the finite-size ladders (~15 CPU-minutes) and Noci et al.'s
# Fig. 10 width ladder (~4 CPU-minutes)
RECORDS = lib/sigprop/experiments/records
records: venv
	$(PY) -m sigprop.experiments regimes --size record --threads 2 --out $(RECORDS)/gg2025_regimes_record.json
	$(PY) -m sigprop.experiments finite-size --size record --threads 2 --out-dir $(RECORDS)
	$(PY) -m sigprop.experiments noci-fig10 --out $(RECORDS)/noci2022_fig10_finite_size.json

# Student notebooks and autograder bundles (otter-grader) -> _build/assignments/
assignments: venv
	$(PY) book/assignments/make_assignments.py

# A release in dist/ (book/release.py): wheel and sdist, the book as an offline HTML zip and a PDF (headless
# Chromium: apt-get install chromium), the notebooks (both editions of every page, the assignments' student
# versions, the wheel), the autograders, the solved assignments, the release notes (CHANGELOG.md) and SHA256SUMS;
# every zip reproducible. Builds on make book (the single-page build for the PDF reuses its execution cache).
# make release RELEASE_FLAGS=--no-pdf where there is no Chromium. The release workflow (.github/workflows/
# release.yml) runs it at each tag and publishes the notebooks and the HTML (.ci/publish).
RELEASE_FLAGS ?=
release: book
	$(PY) book/release.py --dist dist $(RELEASE_FLAGS)

clean:
	rm -rf _build .jupyter_cache
