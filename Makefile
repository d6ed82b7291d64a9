# The README's commands. Each target runs the idempotent bootstrap first, so a fresh
# Debian 12/13 x86_64 machine needs nothing else (as root, or with sudo).
PYTHON_VENV := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: setup demo test lint doctor clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	@$(PYTHON_VENV) examples/vqe_h2.py

test: setup
	$(PYTHON_VENV) -m pytest tests $(PYTEST_ARGS)

doctor: setup
	@$(PYTHON_VENV) -m cofactor doctor

lint:
	.venv/bin/ruff check frontend tests benchmarks examples

clean:
	rm -rf build
