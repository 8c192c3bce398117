"""The demo's own environment variables and flags (`make demo`); the packages' are checked too
(`CHECKED`), from the same tables the configuration reference is rendered from."""

from __future__ import annotations

from devstack.environment import VARIABLES as STACK_VARIABLES
from eventstore.environment import VARIABLES as STORE_VARIABLES
from kafkakit.environment import POSITIVE_NUMBER, SHARED, Variable, choice, for_program
from materializers.environment import VARIABLES as MATERIALIZER_VARIABLES

SECTION = "Demo"
VARIABLES: tuple[Variable, ...] = (
    Variable(
        name="DEMO_SCALE", form=POSITIVE_NUMBER, example="3", default="1", used_by=("demo",),
        meaning="multiplies the demo's data and the length of its live phase", flags=("--scale",),
        section=SECTION,
    ),
    Variable(
        name="DEMO_SEARCH", form=choice("tantivy", "opensearch"), example="opensearch", default="tantivy",
        used_by=("demo",), meaning="where the products' search view lives", flags=("--search",),
        section=SECTION,
    ),
)  # fmt: skip
CHECKED = for_program("demo", SHARED, STORE_VARIABLES, MATERIALIZER_VARIABLES, STACK_VARIABLES, VARIABLES)
