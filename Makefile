# hpcbench: machines (terraform) -> hosts (ansible) -> experiments (hpcbench).
#   make deploy ENV=local [NODES=4] [LINK_RATE=1gbit] [CPUS_PER_NODE=1] [SLURM=true]
#   make deploy ENV=gpulab TOPOLOGY=1x10|10x1
#   make verify ENV=local ; make destroy ENV=local ; make test
#   make demo   (local testbed -> checks -> a small scaling sweep -> report in results/demo)
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

ENV ?= local
CACHE ?= $(HOME)/.cache/hpcbench
export TOOLS_DIR ?= $(CACHE)/tools
export WHEELHOUSE ?= $(CACHE)/wheelhouse
# Providers come from the project's mirror (tools/providers.sh writes this).
export TF_CLI_CONFIG_FILE := $(TOOLS_DIR)/tofurc
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

.PHONY: help demo campaign campaign-lm figures scale report bench-advice bench-forecast bench-deploy bench-harness bench-gpu bench-links bench-published tools host-packages engine venv wheelhouse terraform providers images \
        base-image node-image stack-image enroot-pyxis deploy verify destroy \
        test test-unit lint clean-cache

# The usage lines above (those starting '#   '), then every target with the text
# after its '## ' (a target without one is missing from this list).
help: ## this list
	@sed -n 's/^#   //p' Makefile
	@echo
	@awk -F ':.*## ' '/^[a-z][a-z-]*:.*## / {printf "  %-16s %s\n", $$1, $$2}' Makefile

## --- tooling ------------------------------------------------------------
tools: host-packages engine venv terraform providers ## host packages, Docker, the venv, Terraform and its providers

host-packages: ## the Debian packages the tools build from (root)
	@tools/host-packages.sh

engine: host-packages ## a Docker engine that answers (tools/docker-engine.sh)
	@tools/docker-engine.sh

wheelhouse: host-packages ## torch, JupyterLab and Horovod's wheel, once, in CACHE/wheelhouse
	@PYTHON=$(HOST_PYTHON) tools/wheelhouse.sh

# The venv is rebuilt when the pins change.
venv: $(VENV)/.installed ## .venv with the pinned dependencies, rebuilt when the pins change
$(VENV)/.installed: pyproject.toml images/stack/requirements.txt | wheelhouse
	@echo "venv $(VENV): installing pinned dependencies"
	@$(HOST_PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q -e '.[test]'
	@$(PY) -m pip install -q --no-index --find-links $(WHEELHOUSE) \
	   $$(grep -E '^(torch|torchvision|horovod|nvidia-ml-py)==' images/stack/requirements.txt)
	@# Horovod's version stays when its wheel is built anew (MPI added): install it again.
	@$(PY) -m pip install -q --no-index --find-links $(WHEELHOUSE) --force-reinstall --no-deps \
	   $$(grep -E '^horovod==' images/stack/requirements.txt)
	@touch $@

# tofu or terraform from PATH; otherwise OpenTofu built from the Go module proxy.
terraform: host-packages ## tofu or terraform from PATH, else OpenTofu built from source
	@if command -v tofu >/dev/null || command -v terraform >/dev/null; then \
	   echo "terraform: $$(command -v tofu || command -v terraform)"; \
	 else tools/opentofu.sh; fi

providers: host-packages ## the Terraform providers, built into a local mirror
	@tools/providers.sh

## --- images -------------------------------------------------------------
# The node, base and stack images; then enroot and pyxis built from their release
# sources against the node image's Slurm, for SLURM=true testbeds (VENDOR_DIR: a
# folder holding the two release archives, where GitHub is out of reach).
# A target each, so that `make -j2 tools images` (.ci/run) builds the providers and
# the base and node images while the wheels download and Horovod's wheel builds.
images: stack-image enroot-pyxis ## the base, node and stack images; enroot and pyxis

base-image: engine ## debian:bookworm-slim, pulled or debootstrapped (images/base)
	@images/build.sh base

node-image: base-image ## the testbed's "VM": systemd, sshd, Slurm (images/node)
	@images/build.sh node

stack-image: node-image wheelhouse ## torch, Horovod, JupyterLab from the wheelhouse (images/stack)
	@images/build.sh stack

enroot-pyxis: node-image ## enroot and pyxis from their release sources (tools/enroot-pyxis.sh)
	@tools/enroot-pyxis.sh

# The stack image as a .sqsh in the local image store, which a SLURM=true testbed
# mounts at /images (exported again only when the stack image changed).
IMAGE_STORE ?= $(CACHE)/images

## --- testbed life cycle --------------------------------------------------
deploy: tools $(if $(filter local,$(ENV)),images $(if $(filter true,$(SLURM)),stack-sqsh)) ## ENV's machines and configuration
	@$(PY) -m hpcbench deploy --env $(ENV) $(VARS) \
	   $(if $(and $(filter local,$(ENV)),$(filter true,$(SLURM))),--var image_store=$(IMAGE_STORE))

verify: venv ## ENV's testinfra checks against its nodes
	@$(PY) -m hpcbench verify --env $(ENV)

# Campaign testbeds are their own (`campaign destroy FILE`); destroy lists the
# campaign state folders left under .hpcbench/campaigns and that command.
destroy: venv ## ENV's machines and what they hold, released
	@$(PY) -m hpcbench destroy --env $(ENV)

## --- the main job on the local testbed -------------------------------------
# Four nodes of half a core each (this fits two cores), links shaped to
# 200 Mbit/s so that the network shows on CPUs; a small CPU model.
DEMO_OUT ?= results/demo
demo: ## a 4-node local testbed, its checks, a small sweep, a report (DEMO_OUT)
	@$(MAKE) --no-print-directory deploy ENV=local NODES=$(or $(NODES),4) \
	   CPUS_PER_NODE=$(or $(CPUS_PER_NODE),0.5) LINK_RATE=$(or $(LINK_RATE),200mbit)
	@$(MAKE) --no-print-directory verify ENV=local
	@$(PY) -m hpcbench scale --env local --nodes 1,2,4 --batch 64 --model resnet18 \
	   --image-size 64 --repeats 3 --warmup 3 --windows 4 --steps 3 --min-window-s 3 \
	   --target-ci 10% --max-repeats 6 --budget 16m --out $(DEMO_OUT) --resume
	@$(PY) -m hpcbench report --out $(DEMO_OUT)

# Several testbeds x one sweep, each deployed, verified, measured and destroyed in
# turn, into one comparison report (docs/campaigns.md). The default is the
# embedded one: the local testbed at 200 Mbit/s and 1 Gbit/s.
#   make campaign [CAMPAIGN=campaigns/local.yaml] [RESUME=1]   (several testbeds -> one report)
CAMPAIGN ?= campaigns/local.yaml
campaign: tools $(if $(filter campaigns/local.yaml,$(CAMPAIGN)),images) ## CAMPAIGN's testbeds in turn, one report
	@$(PY) -m hpcbench campaign run $(CAMPAIGN) $(if $(RESUME),--resume)

# The embedded transformer campaign: gpt-tiny under DDP and FSDP2 at 1 and 2 nodes,
# the local testbed at 200 Mbit/s and 1 Gbit/s (campaigns/local-lm.yaml).
#   make campaign-lm [RESUME=1]
campaign-lm: tools images ## the small transformer (DDP, FSDP2) over two link rates, one report
	@$(PY) -m hpcbench campaign run campaigns/local-lm.yaml $(if $(RESUME),--resume)

# README's picture: the local campaign's charts, copied where README shows them
# (each chart names the command that made it in its corner).
figures: ## the local campaign's charts copied to docs/figures
	@test -f results/local/efficiency.png || { echo "figures: run \`make campaign\` first"; exit 2; }
	@mkdir -p docs/figures
	@cp results/local/efficiency.png docs/figures/campaign-local-efficiency.png
	@cp results/local/throughput.png docs/figures/campaign-local-throughput.png
	@echo "figures: docs/figures/campaign-local-{efficiency,throughput}.png from results/local"

## --- experiments ----------------------------------------------------------
#   make scale ENV=local SWEEP_NODES=1-4 BATCH=32,64 [MODEL=resnet18 IMAGE_SIZE=64]
# (NODES already means the testbed's node count for deploy.)
OUT ?= results
scale: venv ## a scaling sweep on ENV's deployed testbed into OUT
	@$(PY) -m hpcbench scale --env $(ENV) --nodes $(or $(SWEEP_NODES),1-10) \
	   --batch $(or $(BATCH),32,64,96) $(if $(MODEL),--model $(MODEL)) \
	   $(if $(IMAGE_SIZE),--image-size $(IMAGE_SIZE)) --out $(OUT)

report: venv ## the report of OUT (results)
	@$(PY) -m hpcbench report --out $(OUT)

# Figures for docs/benchmarks.md: deploy times, harness overhead and fidelity, efficiency
# against the predicted band at two link rates (needs a deployed 4-node testbed).
# The local advice scored (docs/benchmarks.md, "The local advice"): advise over the
# local testbed at two link rates (campaigns/local-lm.yaml's places) writes every
# option that fits as a campaign, which runs; its report ranks the forecast against
# what was measured, with the interval the measurements leave.
#   make bench-advice [RESUME=1]
ADVICE := results/advice-local
bench-advice: tools images ## advise over the local testbeds, run the advice, score it
	@mkdir -p $(dir $(ADVICE))
	@$(if $(RESUME),,$(PY) -m hpcbench advise --model gpt-tiny --tokens 10M \
	   --campaign campaigns/local-lm.yaml --all --out $(ADVICE).yaml --results $(ADVICE) \
	   --plot $(ADVICE)-forecast.png)
	@$(PY) -m hpcbench campaign run $(ADVICE).yaml $(if $(RESUME),--resume)
	@grep -E "^(Ranking|Forecast against|The measured front)" $(ADVICE)/report.md

# The forecast on machines it was not tuned on (docs/benchmarks.md, "The forecast on
# other machines"): the local testbed as four machine variants (quota, pinning, a
# background load), each a campaign at two link rates per workload, every cell's plan
# and re-forecast scored against its measurement. All eight take about two hours.
#   make bench-forecast [VARIANTS=pinned,half] [WORKLOADS=cnn,lm] [RESUME=1] [REPLAY=1]
bench-forecast: tools images ## the forecast scored on emulated machine variants
	@$(PY) evaluation/forecast_variants.py $(if $(VARIANTS),--variants $(VARIANTS)) \
	   $(if $(WORKLOADS),--workloads $(WORKLOADS)) $(if $(RESUME),--resume) \
	   $(if $(REPLAY),--replay)

bench-deploy: tools images ## deploy times at 1, 2 and 4 nodes
	@$(PY) evaluation/deploy_time.py --nodes 1,2,4

bench-harness: venv ## the harness's overhead and fidelity against a plain loop
	@$(PY) evaluation/overhead.py
	@$(PY) evaluation/fidelity.py --threads 1 --image-size 32 --batch 32 --rounds 6 --max-rounds 20

# On a machine with one CUDA GPU and the stack installed (GPU_PY=python3 where torch is
# system-wide): the GPU table in one go (checks, step modes x batch x AMP, JPEG data,
# fidelity), no part started after DEADLINE seconds; figures in results/bench-gpu.
bench-gpu: ## the GPU table on a machine with one CUDA GPU
	@$(or $(GPU_PY),$(PY)) evaluation/gpu_steps.py all --deadline-s $(or $(DEADLINE),420)

bench-links: venv ## efficiency against the prediction at RATES on ENV
	@$(PY) evaluation/testbed_links.py --env $(ENV) --rates $(or $(RATES),1gbit,100mbit) \
	   --reshape "$(MAKE) deploy ENV=$(ENV) NODES=4 LINK_RATE={rate}"

# `hpcbench predict` against published multi-node results (evaluation/published.json).
bench-published: venv ## predict against published multi-node results and layouts
	@$(PY) evaluation/published.py --markdown
	@$(PY) evaluation/layouts_score.py --markdown

## --- checks --------------------------------------------------------------
# Everything, the local testbed end to end included: first the tests that time this
# machine's CPU (marker solo), alone, one after another; then the rest on TEST_WORKERS
# pytest-xdist workers, the shared testbed's e2e tests on one and the stand-ins' on
# another, in their order, the other tests beside them (GROUPS in tests/conftest.py).
# The 25 slowest are listed, to see where CI's time goes.
TEST_WORKERS ?= 2
test: tools images ## every test, end to end (the full loop)
	@$(PY) -m pytest -ra -m solo tests/unit tests/e2e
	@$(PY) -m pytest -ra -m "not solo" -n $(TEST_WORKERS) --durations=25

test-unit: venv ## tests/unit only, no Docker or testbed (the quick loop)
	@$(PY) -m pytest -ra tests/unit

# A target per tool, so that `make -j2 lint` runs two at once (each is one core's work).
.PHONY: lint-ruff lint-mypy lint-terraform lint-ansible
lint: lint-ruff lint-mypy lint-terraform lint-ansible ## every linter below

lint-ruff: venv ## ruff check and ruff format --check
	@$(PY) -m ruff check .
	@$(PY) -m ruff format --check .

lint-mypy: venv ## mypy over the typed packages (pyproject.toml)
	@$(PY) -m mypy

lint-terraform: terraform ## terraform fmt -check over terraform/ and environments/
	@$$(command -v tofu || command -v terraform) fmt -check -recursive terraform environments

lint-ansible: venv ## ansible-lint over ansible/ (.ansible-lint)
	@ANSIBLE_CONFIG=ansible/ansible.cfg PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/ansible-lint

# Every download and build kept between clones: the wheelhouse and Horovod's wheel,
# OpenTofu and its providers, enroot and pyxis, the .sqsh image store. Docker's images
# stay (docker image rm). The next make tools builds them again (docs/development.md).
clean-cache: ## remove CACHE (~/.cache/hpcbench) after saying what it holds
	@case "$(CACHE)" in ""|/|$(HOME)|$(HOME)/) echo "clean-cache: CACHE=$(CACHE) is no cache folder" >&2; exit 2;; esac
	@if [ -e "$(CACHE)" ]; then \
	   echo "clean-cache: removing $(CACHE) ($$(du -sh "$(CACHE)" | cut -f1): $$(ls -m "$(CACHE)"))"; \
	   rm -rf -- "$(CACHE)"; \
	 else echo "clean-cache: $(CACHE) does not exist; nothing to remove"; fi

## --- Slurm clusters (docs/slurm.md) --------------------------------------
# The stack image as an enroot/pyxis squashfs: make enroot-image [SQSH=file.sqsh]
.PHONY: enroot-image stack-sqsh
enroot-image: images ## the stack image as an enroot squashfs (SQSH)
	@images/enroot-export.sh $(or $(SQSH),hpcbench+stack.sqsh)
stack-sqsh: images ## that squashfs in IMAGE_STORE, for SLURM=true testbeds
	@ENROOT_EXPORT_CHECK=0 images/enroot-export.sh --cached $(IMAGE_STORE)/hpcbench+stack.sqsh
