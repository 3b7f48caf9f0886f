# Two commands do all set-up on a fresh machine:
#   make bench   - CPU smoke benchmark on synthetic data (creates .venv first)
#   make test    - the whole test suite (creates .venv and the Horovod venv first)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TF_VERSION ?= 2.21.0
# On a machine with an NVIDIA driver, TensorFlow's pip wheel needs its CUDA
# and cuDNN libraries from the [and-cuda] extra, or it silently sees no GPU.
TF_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo "[and-cuda]")

.PHONY: venv bench doctor lint test test-fast horovod image clean

$(VENV)/.installed: setup.cfg pyproject.toml
	@echo "creating $(VENV): TensorFlow $(TF_VERSION)$(TF_EXTRA), tf-keras, JAX, Keras 3 and this project"
	@echo "  (about 3 GB, [and-cuda] several GB more; 1-3 min with pip's cache, longer to download)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install "tensorflow$(TF_EXTRA)==$(TF_VERSION)" "tf-keras==$(TF_VERSION)" -e ".[test,plot,tfds,zmq,jax]"
	@echo "$(VENV) is ready"
	touch $@

venv: $(VENV)/.installed

bench: venv
	$(PY) -m official_bench.classifier_trainer --config_file=configs/examples/resnet/imagenet/cpu_smoke.yaml --model_dir=model_dir/cpu_smoke $(ARGS)

# Checks the machine (TensorFlow's GPUs, short runs per precision/layout/XLA,
# mirrored, 2 local workers, Horovod) and writes model_dir/doctor/doctor.json.
doctor: venv
	$(PY) -m official_bench.doctor $(ARGS)

# The Horovod venv (TF 2.18) is cached in ~/.cache/official_bench; a failed
# build is reported and its tests then skip with the reason.
# Two pytest runs: every test but the timing-sensitive ones on TEST_JOBS
# workers (pytest-xdist; a file's tests stay on one worker), then those
# (marked serial: the scaling model's measured speedups) alone. Exit 5 of
# the second run means ARGS selected none of them. 3 workers on 2 cores:
# the tests wait on processes and sockets about a third of the time
# (docs/testing.md has the times).
TEST_JOBS ?= 3
# Bytecode of the package and the tests, compiled once (0.4 s): where
# PYTHONDONTWRITEBYTECODE is set, as on the machines this suite was timed
# on, each of the suite's ~500 Python processes would compile them again.
BYTECODE = $(PY) -m compileall -q official_bench tests >/dev/null
# ruff (ruff.toml says which rules and why), before the tests: a few seconds.
lint: venv
	$(PY) -m ruff check --no-cache .

test: lint
	bash scripts/install_horovod.sh || echo "WARNING: the Horovod venv could not be built (see above); tests/system/test_horovod.py will skip"
	bash scripts/container_setup.sh || echo "WARNING: containers cannot run here (see above); the container tests will skip"
	$(BYTECODE)
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -m "not serial" $(ARGS)
	$(PY) -m pytest -m serial $(ARGS) || [ $$? -eq 5 ]

# The unit tier (tests/unit: one process each, no cluster): a contributor's
# loop before each commit. Files whole and longest first, as in `test`.
test-fast: lint
	$(BYTECODE)
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile tests/unit $(ARGS)

horovod:
	bash scripts/install_horovod.sh

# The benchmark's image (Containerfile, docs/containers.md), tag IMAGE, with
# docker where its daemon answers, else podman. BASE=... another base image;
# WITH_HOROVOD=1 adds the Horovod venv; IMAGE_ARGS: more build options.
IMAGE ?= official-bench:latest
ENGINE ?= $(shell docker info >/dev/null 2>&1 && echo docker || \
	{ command -v podman >/dev/null 2>&1 && echo podman; } || echo docker)
image:
	$(ENGINE) build -f Containerfile -t $(IMAGE) \
	  $(if $(BASE),--build-arg BASE=$(BASE)) \
	  $(if $(WITH_HOROVOD),--build-arg WITH_HOROVOD=$(WITH_HOROVOD)) \
	  $(IMAGE_ARGS) .

clean:
	rm -rf $(VENV) model_dir logs result
