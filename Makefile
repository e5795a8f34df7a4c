# Two commands do all set-up on a fresh machine:
#   make book   -> _build/html/index.html, every notebook executed
#   make test   -> unit tests of sigprop + every notebook through nbval
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# A CPU build of PyTorch is installed only where the venv has none (Colab and GPU users keep theirs).
TORCH_SPEC ?= torch==2.13.0
# Assignment masters (book/assignments) are graded by tests/test_assignments.py, not run by nbval.
NOTEBOOKS := $(shell find chapters book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -not -path 'book/assignments/*' | sort)

.PHONY: book test test-unit test-notebooks claims bench records assignments venv clean

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[book,test]"
	touch $@

book: venv
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "open _build/html/index.html"

test: test-unit test-notebooks

test-unit: venv
	$(PY) -m pytest tests -q -p no:cacheprovider

test-notebooks: venv
	$(PY) -m pytest --nbval-lax --nbval-current-env --nbval-cell-timeout=900 -q -p no:cacheprovider $(NOTEBOOKS)

claims: venv
	$(PY) -m sigprop.claims

# Speed and memory benchmarks (prints a table; --json FILE writes it)
bench: venv
	$(PY) -m sigprop.bench

# Re-record the training experiment shown in the book (~25 min on 2 CPU cores; minutes on a GPU)
records: venv
	cd lib/sigprop/experiments/records && ../../../../$(PY) -m sigprop.experiments regimes --size record --threads 2 --out gg2025_regimes_record.json

# Student notebooks and autograder bundles (otter-grader) -> _build/assignments/
assignments: venv
	$(PY) book/assignments/make_assignments.py

clean:
	rm -rf _build
