# trn-specdec: one entry point for set-up, synth, tests, deploy and teardown.
# `make synth` and `make test` need only Python 3.11-3.13 and Node.js; they install the rest (pinned).
# Another interpreter: make PYTHON=python3.12 synth

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config/default.yaml
CDK := npx --no-install cdk
CDK_FLAGS := -c config=$(CONFIG) --no-notices

# Offline: no CLI telemetry, no IMDS probing.
export CDK_DISABLE_CLI_TELEMETRY := true
export AWS_EC2_METADATA_DISABLED := true
export UV_PYTHON_DOWNLOADS := never

# vLLM 0.9.1 (the legacy-v0 stack's engine) in its own pinned environment, for the engine-level check in
# tests/engine/; its lock stays out of requirements.lock. vllm itself goes in with --no-deps.
VLLM_PYTHON ?= python3.11
VLLM_0_9_1_VENV := .venv-vllm-0.9.1
# vLLM 0.29.0 (the vllm-neuron stack's engine), the same way: own lock, own environment, vllm --no-deps.
VLLM_0_29_0_VENV := .venv-vllm-0.29.0
# The real Prometheus and promtool the tests run: Debian's package, pinned and unpacked into the tool cache without
# root (tools/prometheus_tool.py; it needs apt's lists, and as root runs `apt-get update` itself when they lack the pin). Its folder names the pinned version
# (tests/tools/test_prometheus_tool.py checks this target against the module).
PROMETHEUS_TOOL := .cache/tools/prometheus-2.42.0/.installed
# Renovate's config validator, pinned by tools/renovate/package-lock.json, in its own folder of the tool cache
# (341 MB: only the tests need it, not synth or deploy); installed again when Renovate bumps the lock
# (tools/renovate_tool.py; tests/tools/test_renovate_tool.py checks this target against the module).
RENOVATE_TOOL := .cache/tools/renovate/.installed

.PHONY: setup synth test test-cold journey lint format preflight versions deploy stage build bench bench-lossless bench-sweep ab coldstart-report destroy teardown-dry-run clean

setup: $(VENV)/.installed node_modules/.installed

# --compile-bytecode: every .pyc is written once here (about 30 s of CPU), instead of each test process compiling
# what it imports again where Python may not write them (PYTHONDONTWRITEBYTECODE set, read-only site-packages);
# uv compiles none by default. The Makefile is a prerequisite so an existing .venv gets a changed recipe.
$(VENV)/.installed: requirements.lock requirements-bootstrap.lock Makefile
	@command -v $(PYTHON) >/dev/null || { echo "PYTHON=$(PYTHON) is not on PATH: install a Python that pyproject.toml's requires-python admits and point make at it, for example make PYTHON=python3.12 synth"; exit 2; }
	$(PYTHON) tools/python_support.py check
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes -r requirements-bootstrap.lock
	$(BIN)/uv pip sync --quiet --python $(BIN)/python --require-hashes --compile-bytecode requirements.lock
	touch $@

$(VLLM_0_9_1_VENV)/.installed: requirements-vllm-0.9.1.lock
	$(VLLM_PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "vLLM 0.9.1 needs Python 3.11, found " + sys.version.split()[0]'
	$(VLLM_PYTHON) -m venv $(VLLM_0_9_1_VENV)
	$(VLLM_0_9_1_VENV)/bin/pip install --quiet --no-deps --require-hashes -r requirements-vllm-0.9.1.lock
	touch $@

$(VLLM_0_29_0_VENV)/.installed: requirements-vllm-0.29.0.lock
	$(VLLM_PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "the vLLM 0.29.0 check environment uses Python 3.11 (the local CPU torch 2.13.0 wheel is cp311), found " + sys.version.split()[0]'
	$(VLLM_PYTHON) -m venv $(VLLM_0_29_0_VENV)
	$(VLLM_0_29_0_VENV)/bin/pip install --quiet --no-deps --require-hashes -r requirements-vllm-0.29.0.lock
	touch $@

$(PROMETHEUS_TOOL): tools/prometheus_tool.py
	$(PYTHON) -m tools.prometheus_tool

$(RENOVATE_TOOL): tools/renovate_tool.py tools/renovate/package.json tools/renovate/package-lock.json
	$(PYTHON) -m tools.renovate_tool

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Lists the templates the cloud assembly's manifest names, and removes per-stack files another config's synth
# left in cdk.out/ (naming them), so they are never taken for this synth's.
synth: setup
	$(CDK) synth --quiet $(CDK_FLAGS) -c dist=dist
	@$(BIN)/python -m tools.synth_report --out cdk.out --dist dist

test: setup $(VLLM_0_9_1_VENV)/.installed $(VLLM_0_29_0_VENV)/.installed $(PROMETHEUS_TOOL) $(RENOVATE_TOOL)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tools.test_shards

# The suite as a fresh clone runs it: no verdict from an earlier run (tests/result_cache.py), mypy from scratch.
test-cold:
	rm -rf .cache/tests .mypy_cache/tests-*
	TRN_SPECDEC_TEST_CACHE=0 $(MAKE) test

# The README's flow, synth to the teardown sweep's dry run, offline against a local world (moto, a loopback Hugging
# Face, a fake cluster that runs the rendered Jobs and pods with the shipped code, vLLM stand-ins, the pinned Envoy):
# one line per step, outputs in journey-results/<config>/ (tests/journey/). Several: CONFIG="a.yaml b.yaml".
# Its own target, not part of `make test`: about 2.5 minutes per config on 2 cores, and CI runs it after the tests.
journey: setup $(PROMETHEUS_TOOL)
	$(BIN)/python -m tests.journey $(foreach c,$(CONFIG),--config $(c))

lint: setup
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .

# What the version map pins per Kubernetes version, with its sources; with AWS credentials also what EKS offers now
# per add-on (DescribeAddonVersions: default and newest). Read-only. Renovate's config (renovate.json) proposes updates.
versions: setup
	$(BIN)/python -m ops.versions_report --config $(CONFIG)

# Read-only checks of the account against the config, each ok / FAIL with the fix / skipped (docs/preflight.md);
# within 30 s whatever the network does. PREFLIGHT_ARGS=--offline skips the Hugging Face revision check.
preflight: setup
	$(BIN)/python -m ops.preflight --config $(CONFIG) $(PREFLIGHT_ARGS)

# The preflight first; bootstrap is idempotent; broadening IAM/security-group changes are shown for confirmation.
deploy: setup
	$(BIN)/python -m ops.preflight --config $(CONFIG) $(PREFLIGHT_ARGS)
	$(CDK) bootstrap $(CDK_FLAGS) -c deploy=true
	$(CDK) deploy --all $(CDK_FLAGS) -c deploy=true --require-approval broadening

# Stage the pinned Hugging Face checkpoints into the bucket with an in-cluster Job (skips staged models)
stage: setup
	$(BIN)/python -m ops.stage_checkpoints --apply --config $(CONFIG)

# Compile and publish one profile's artifact on the cluster (stages its checkpoints first if needed):
# make build PROFILE=speculative
build: setup
	@test -n "$(PROFILE)" || { echo "usage: make build PROFILE=<a profile name from $(CONFIG)>"; exit 2; }
	$(BIN)/python -m ops.build_artifact $(PROFILE) --apply --config $(CONFIG)

# Benchmark every service side by side in the cluster: make bench [BENCH_ARGS="--requests 16"]
bench: setup
	$(BIN)/python -m ops.run_benchmark --apply --config $(CONFIG) -- $(BENCH_ARGS)

# The lossless check in the cluster: every output against the baseline's at batch size 1, both stop modes
bench-lossless: setup
	$(BIN)/python -m ops.run_benchmark --apply --lossless --config $(CONFIG) -- $(BENCH_ARGS)

# The load sweep in the cluster (docs/sweep.md): concurrency and rate grids, goodput, the crossover where
# speculation stops paying: make bench-sweep [BENCH_ARGS="--repeats 1"].
bench-sweep: setup
	$(BIN)/python -m ops.run_benchmark --apply --sweep --config $(CONFIG) -- $(BENCH_ARGS)

# From a deployed stack to the A/B report: stage, build every profile, benchmark
ab: setup
	$(BIN)/python -m ops.stage_checkpoints --apply --config $(CONFIG)
	for profile in $$($(BIN)/python -c 'import sys; from config import load_config; print(*(p.name for p in load_config(sys.argv[1]).profiles))' $(CONFIG)); do \
		$(BIN)/python -m ops.build_artifact $$profile --apply --config $(CONFIG) || exit 1; \
	done
	$(BIN)/python -m ops.run_benchmark --apply --config $(CONFIG) -- $(BENCH_ARGS)

# Where each serving pod's cold start went (table + timeline PNG in coldstart/), also sent to CloudWatch
coldstart-report: setup
	$(BIN)/python -m ops.coldstart_report --config $(CONFIG) --publish

# cdk destroy, then teardown's tag sweep (ops/teardown_sweep.py) of what CloudFormation cannot see
destroy: setup
	$(CDK) destroy --all --force $(CDK_FLAGS)
	$(BIN)/python -m ops.teardown_sweep --config $(CONFIG)

# What `make destroy`'s tag sweep would delete, deleting nothing
teardown-dry-run: setup
	$(BIN)/python -m ops.teardown_sweep --config $(CONFIG) --dry-run

clean:
	rm -rf cdk.out dist .pytest_cache
