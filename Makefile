# hpcbench: machines (terraform) -> hosts (ansible) -> experiments (hpcbench).
#   make deploy ENV=local [NODES=4] [LINK_RATE=1gbit] [CPUS_PER_NODE=1] [SLURM=true]
#   make deploy ENV=gpulab TOPOLOGY=1x10|10x1
#   make verify ENV=local ; make destroy ENV=local ; make test
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ENV ?= local
CACHE ?= $(HOME)/.cache/hpcbench
export TOOLS_DIR ?= $(CACHE)/tools
export WHEELHOUSE ?= $(CACHE)/wheelhouse
# Sites behind a TLS-intercepting proxy: the CA bundle that image builds trust.
export EXTRA_CA_BUNDLE ?= $(SSL_CERT_FILE)
VENV ?= .venv
PY := $(VENV)/bin/python
HOST_PYTHON ?= python3

# Settings forwarded to the env's Terraform variables (remembered between deploys).
VARS := $(if $(NODES),--var node_count=$(NODES)) \
        $(if $(filter-out undefined,$(origin LINK_RATE)),--var link_rate=$(LINK_RATE)) \
        $(if $(CPUS_PER_NODE),--var cpus_per_node=$(CPUS_PER_NODE)) \
        $(if $(SLURM),--var enable_slurm=$(SLURM)) \
        $(if $(TOPOLOGY),--var topology=$(TOPOLOGY))

.PHONY: help tools engine venv wheelhouse terraform providers images deploy verify destroy \
        test test-unit lint clean-cache

help:
	@sed -n 's/^#   //p' Makefile

## --- tooling ------------------------------------------------------------
tools: engine venv terraform providers

engine:
	@tools/docker-engine.sh

wheelhouse:
	@PYTHON=$(HOST_PYTHON) tools/wheelhouse.sh

# The venv is rebuilt when the pins change.
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml images/stack/requirements.txt | wheelhouse
	@echo "venv $(VENV): installing pinned dependencies"
	@$(HOST_PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q -e '.[test]'
	@$(PY) -m pip install -q --no-index --find-links $(WHEELHOUSE) \
	   $$(grep -E '^(torch|torchvision|horovod|nvidia-ml-py)==' images/stack/requirements.txt)
	@touch $@

# tofu or terraform from PATH; otherwise OpenTofu built from the Go module proxy.
terraform:
	@if command -v tofu >/dev/null || command -v terraform >/dev/null; then \
	   echo "terraform: $$(command -v tofu || command -v terraform)"; \
	 else tools/opentofu.sh; fi

providers:
	@tools/providers.sh

## --- images -------------------------------------------------------------
images: engine wheelhouse
	@images/build.sh all

## --- testbed life cycle --------------------------------------------------
deploy: tools $(if $(filter local,$(ENV)),images)
	@$(PY) -m hpcbench deploy --env $(ENV) $(VARS)

verify: venv
	@$(PY) -m hpcbench verify --env $(ENV)

destroy: venv
	@$(PY) -m hpcbench destroy --env $(ENV)

## --- checks --------------------------------------------------------------
# Everything, the local testbed end to end included.
test: tools images
	@$(PY) -m pytest -ra

test-unit: venv
	@$(PY) -m pytest -ra tests/unit

lint: venv
	@$(PY) -m ruff check hpcbench bench tests
	@terraform fmt -check -recursive terraform || tofu fmt -check -recursive terraform

## --- Slurm clusters (docs/slurm.md) --------------------------------------
# The stack image as an enroot/pyxis squashfs: make enroot-image [SQSH=file.sqsh]
.PHONY: enroot-image
enroot-image: images
	@images/enroot-export.sh $(or $(SQSH),hpcbench+stack.sqsh)
