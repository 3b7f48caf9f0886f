# Two commands do all set-up on a fresh machine:
#   make bench   - CPU smoke benchmark on synthetic data (creates .venv first)
#   make test    - the whole test suite (creates .venv first)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TF_VERSION ?= 2.21.0

.PHONY: venv bench test test-fast horovod clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "tensorflow==$(TF_VERSION)" "tf-keras==$(TF_VERSION)" -e ".[test,plot]"
	touch $@

venv: $(VENV)/.installed

bench: venv
	$(PY) -m official_bench.classifier_trainer --config_file=configs/examples/resnet/imagenet/cpu_smoke.yaml --model_dir=model_dir/cpu_smoke $(ARGS)

test: venv
	$(PY) -m pytest $(ARGS)

test-fast: venv
	$(PY) -m pytest -m "not slow" $(ARGS)

horovod:
	bash scripts/install_horovod.sh

clean:
	rm -rf $(VENV) model_dir logs result
