# One place for the commands the README and CI use.
VENV ?= .venv
BIN := $(VENV)/bin
# molecule and ansible-lint call ansible-* tools by name
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The simulator (ascend_sim) is not installed (not in the wheel): it runs from src/.
export PYTHONPATH := $(CURDIR)/src$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: setup venv lint unit images test demo demo-down bench clean collection

# The machine's set-up, first step of demo, test, images, bench and molecule-*: as root it
# installs what is missing (apt: python3-venv, docker.io, debootstrap) and starts dockerd when no
# Docker engine answers; otherwise it stops at once naming the cause and the command to run.
SETUP := sh docker/ci-setup.sh
setup:
	@$(SETUP) --no-images

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	@$(SETUP) --python
	python3 -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	# CPU build of torch (on this project's machines it comes from local disk); only the
	# precision-alignment tests and tools/train_tiny_qwen3.py use it.
	$(BIN)/pip install -q 'torch==2.13.0' || echo "torch not installable here: precision tests will be skipped"
	$(BIN)/pip install -q -e '.[test,train]'
	touch $@

# yamllint (strict) and ansible-lint (production profile) run as tests in
# tests/integration/test_ansible_lint.py, so `make test` runs them once.
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: venv
	$(BIN)/pytest -q -m "not docker and not molecule" tests

images: setup venv
	docker/build-images.sh

# The whole suite: lint, unit, Docker integration and every molecule scenario, on two pytest-xdist
# workers: the Docker tests in two groups that share no host name or report directory, one group
# per worker, one test after another; the rest around them (tests/conftest.py).
# PYTEST_ARGS="-n 0" runs it in one process.
PYTEST_ARGS ?= -n 2
test: setup lint images
	$(BIN)/pytest -q $(PYTEST_ARGS) tests

molecule-%: setup venv images
	$(BIN)/molecule -c molecule/_shared/base.yml test -s $*

# Quick start: one simulated 8 x 910B3 host, the tiny FP8 model staged on the controller,
# then the real playbook against the host; deploy.yml ends with the deployment summary and the
# Prometheus targets. The replicas' ports 8000-8007 on the host are published on free, random
# ports of the controller's 127.0.0.1 (sim_published_ports in inventory/sim/hosts.yml);
# tools/demo_usage.py prints curl, ascend-deploy verify and openai-client commands against them.
demo: setup venv images
	$(BIN)/python -m ascend_sim.fleet up --name-prefix demo --preset a2-910b3-8x64g \
		--ports 8000-8007 --group ascend_llm --inventory inventory/sim/hosts.yml
	$(BIN)/ansible-playbook playbooks/sim_model.yml
	$(BIN)/ansible-playbook deploy.yml
	@$(BIN)/python tools/demo_usage.py

demo-down: venv
	$(BIN)/python -m ascend_sim.fleet down --name-prefix demo --inventory inventory/sim/hosts.yml

bench: setup venv images
	$(BIN)/python benchmarks/bench_convert.py --layers 4
	$(BIN)/python benchmarks/bench_deploy.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .cache

# The Ansible collection ascend_vllm.serving as a tarball in dist/ (install it with
# `ansible-galaxy collection install dist/ascend_vllm-serving-*.tar.gz`).
collection: venv
	$(BIN)/python tools/build_collection.py --output-path dist
