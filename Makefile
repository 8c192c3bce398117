# Every target documents itself: `make help`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
# The local stack runs OpenSearch too (the search view's second backend; its tests need it): about
# 350 MB and 10 s of CPU at start. STACK_OPENSEARCH=0 leaves it out.
export STACK_OPENSEARCH ?= 1
# `make test` and `make demo` run the services as local processes even where a Docker engine answers (the
# containers have targets of their own), so a run does not change backend with the machine.
export TOOLKIT_STACK ?= local
# The integration suites `make test-containers` runs on containers: every package's, the plugin's own
# fixtures and the example project. The local-process runner (stack/test_lifecycle.py), the secured
# listener (security/), the docs, the bench harness and the driver's own JVM start (test_driver_jvm,
# test_driver_jit_choice: nothing there touches the services) stay with `make test`.
CONTAINER_SUITES ?= tests/integration/containers tests/integration/stack/test_plugin_fixtures.py tests/integration/stack/test_cdc_round_trip.py \
	tests/integration/cdc tests/integration/eventstore tests/integration/materializers tests/integration/examples
.PHONY: help prerequisites venv fetch connect-plugin up down status up-cluster down-cluster test-cluster lint unit integration docs test demo bench clean images test-containers containers-suite demo-compose

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

prerequisites: ## install the missing Debian packages (Java, Maven, Postgres 15, Redis) when root
	@bash docker/prerequisites.sh

$(STAMP): pyproject.toml examples/shop/pyproject.toml examples/inventory/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# the demo's shop (Order aggregate, products/orders materializers): a plug-in, as a user's would be
	$(BIN)/pip install -q --no-deps -e examples/shop
	# the inventory example (its Stock aggregate and low-stock view): the guides' examples import it
	$(BIN)/pip install -q --no-deps -e examples/inventory
	touch $(STAMP)

venv: prerequisites $(STAMP) ## create .venv and install the toolkit with its pinned dependencies

fetch: venv ## download the JVM artefacts (Kafka, Connect, Debezium, Apicurio, Spark jars) into ~/.cache/kafka-toolkit
	$(BIN)/devstack fetch

connect-plugin: prerequisites ## build the toolkit's Connect plugin and Avro schema resolver into connect-plugins/*/target (for docker compose or your own Connect)
	mvn -B -q -f connect-plugins/oversize-router/pom.xml -DskipTests package
	mvn -B -q -f connect-plugins/schema-resolver/pom.xml -DskipTests package

up: fetch ## start the local stack (Postgres, Kafka, Connect+Debezium, Redis, Apicurio); writes .stack/env
	$(BIN)/devstack up

down: venv ## stop everything the local stack started
	$(BIN)/devstack down

status: venv ## show each service's pid, port, readiness and memory
	$(BIN)/devstack status

up-cluster: fetch ## the cluster topology: 3 KRaft brokers, 2 Connect workers, a Spark master + 2 workers, Postgres, Redis, Apicurio; writes .stack-cluster/env
	$(BIN)/devstack --topology cluster up

down-cluster: venv ## stop the cluster topology
	$(BIN)/devstack --topology cluster down

test-cluster: fetch ## the fault matrix (tests marked cluster) on the cluster topology, started or reused
	STACK_TOPOLOGY=cluster $(BIN)/pytest -m cluster tests/cluster

lint: venv ## ruff, the import contracts (.importlinter: layers, no circles) and mypy (strict on the packages)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python tools/lint_history.py
	$(BIN)/mypy kafkakit cdc eventstore materializers docker/devstack demo examples/shop/shop

unit: venv ## unit tests only (no services)
	$(BIN)/pytest -m "not integration" tests

integration: fetch ## integration tests only (starts or reuses the stack)
	$(BIN)/pytest -m "integration and not cluster and not containers" tests

docs: venv ## build the documentation site into site/ (mkdocs --strict: a broken link or a missing page fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: fetch lint docs ## everything but the cluster's fault matrix: lint, the docs build, unit and integration tests against the real stack
	$(BIN)/pytest -m "not cluster and not containers" tests

demo: fetch ## the main job: the whole pipeline end to end on the real stack
	$(BIN)/python -m demo.run

images: fetch ## build the container images here from the cached artefacts (starts dockerd if none answers; only what changed)
	bash docker/engine.sh $(BIN)/devstack images build

test-containers: fetch ## the integration suites on containers (testcontainers): starts dockerd if none answers, builds missing images
	bash docker/engine.sh $(MAKE) --no-print-directory containers-suite

containers-suite: # (inside test-containers, with an engine answering)
	$(BIN)/devstack images build
	$(BIN)/devstack containers prune
	TOOLKIT_STACK=containers $(BIN)/pytest -m "integration and not cluster" $(CONTAINER_SUITES) \
		--ignore=tests/integration/materializers/test_driver_jvm.py \
		--ignore=tests/integration/materializers/test_driver_jit_choice.py

demo-compose: fetch ## the demo against docker/compose.yaml on the images built here; `docker-compose down -v` after
	BIN=$(BIN) bash docker/engine.sh bash docker/demo-compose.sh

bench: fetch ## every benchmark scenario side by side with its baseline (python -m bench list); QUICK=1 for small sizes (a few minutes)
	$(BIN)/python -m bench run --size $(if $(QUICK),quick,full)

clean: down down-cluster ## stop the stacks and delete their state (.stack/, .stack-cluster/)
	rm -rf .stack .stack-cluster
