"""The local stack's and the test fixtures' environment variables (the reference's and the `devstack`
CLI's check's one source; `StackConfig.from_env` and `StackChoice.from_env` read them)."""

from __future__ import annotations

from devstack.config import CLUSTER_PORTS, DEFAULT_PORTS, TOPOLOGIES
from devstack.images import IMAGE_SOURCES
from devstack.session import BACKENDS
from kafkakit.environment import DSN, HTTP_URL, PATH, PORT, POSITIVE_NUMBER, TEXT, YES_NO, Variable, choice

SECTION = "Local stack and test fixtures"
STACK = ("devstack", "demo")
FIXTURES = ("tests", "demo")

VARIABLES: tuple[Variable, ...] = (
    Variable(name="STACK_DIR", form=PATH, example="/srv/stack", default=".stack", used_by=STACK, section=SECTION,
             meaning="the local stack's state: data, logs, configs, pid files, the env file"),
    Variable(name="STACK_TOPOLOGY", form=choice(*TOPOLOGIES), example="cluster", default="single", used_by=STACK,
             section=SECTION, flags=("--topology",), meaning="one node of each service, or the cluster layout"),
    Variable(name="STACK_READY_TIMEOUT", form=POSITIVE_NUMBER, example="180", default="90", used_by=STACK,
             section=SECTION, meaning="seconds a service may take to become ready"),
    Variable(name="STACK_OPENSEARCH", form=YES_NO, example="1", default="0 (the Makefile sets 1)", used_by=STACK,
             section=SECTION, meaning="whether the stack runs OpenSearch too"),
    Variable(name="TOOLKIT_CACHE", form=PATH, example="/var/cache/kafka-toolkit", default="~/.cache/kafka-toolkit",
             used_by=STACK, section=SECTION, meaning="where the JVM artefacts are downloaded to"),
    *(
        Variable(name=f"STACK_{service.upper()}_PORT", form=PORT, example=str(port + 1000), default=str(port),
                 used_by=STACK, section=SECTION, meaning=f"the {service.replace('_', ' ')} port (must be free)")
        for service, port in {**DEFAULT_PORTS, **CLUSTER_PORTS}.items()
    ),
    Variable(name="TOOLKIT_STACK", form=choice(*BACKENDS), example="external", default="auto", used_by=FIXTURES,
             section=SECTION, meaning="the stack the pytest plugin and the demo use"),
    Variable(name="TOOLKIT_IMAGES", form=choice(*IMAGE_SOURCES), example="official", default="built",
             used_by=FIXTURES, section=SECTION,
             meaning="the container stack's images: built here (devstack images build) or the upstream ones"),
    Variable(name="TOOLKIT_BASE_IMAGE", form=TEXT, example="debian:bookworm-slim",
             default="a Debian made here with debootstrap", used_by=STACK, section=SECTION,
             meaning="the image `devstack images build` starts from, where a registry serves one"),
    Variable(name="TOOLKIT_CONNECT_PG_DSN", form=DSN, example="postgresql://postgres@db:5432/postgres",
             used_by=FIXTURES, section=SECTION, meaning="Postgres as Connect reaches it, on an external stack"),
    Variable(name="TOOLKIT_CONNECT_REGISTRY_URL", form=HTTP_URL, example="http://registry:8080/apis/ccompat/v7",
             used_by=FIXTURES, section=SECTION, meaning="the registry as Connect reaches it, on an external stack"),
)  # fmt: skip
