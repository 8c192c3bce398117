"""Why a connector or task FAILED, in one line a user can act on (pure: a Connect trace in, text out).

Connect reports a failed task as a Java stack trace whose first line is often only the wrapper
("Tolerance exceeded in error handler"); the root cause is the last "Caused by:". Failures inside the
schema registry's client (Apicurio's Avro converter registering or looking up a schema) often carry no
message at all, so they are named as such, with the registry URL the connector was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cdc.connector_spec import SCHEMA_RESOLVER_CLASS

_REGISTRY_CLIENT = "io.apicurio.registry"
# What a worker without the toolkit's resolver jar reports: no class of its package.
_RESOLVER_MISSING = f"ClassNotFoundException: {SCHEMA_RESOLVER_CLASS.rpartition('.')[0]}."
_RULE_VIOLATION = "RuleViolationException"
_REGISTRY_URL_KEYS = ("value.converter.apicurio.registry.url", "key.converter.apicurio.registry.url")


def failure_cause(
    trace: str | None, config: Mapping[str, str], column_changes: Sequence[str] = ()
) -> str | None:
    """The root cause of a failure trace, or None when there is no trace. `column_changes`: what
    `cdc.schema_refusal.explain` found behind a schema the registry's compatibility rule refused."""
    lines = [line.strip() for line in (trace or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    root = causes[-1] if causes else lines[0]
    if _RULE_VIOLATION in (trace or ""):
        changed = f"; the table changed: {', '.join(column_changes)}" if column_changes else ""
        return (
            f"the schema registry refused the table's new schema under the subject's compatibility rule "
            f"({root}){changed}; revert that change (e.g. restore the column's type, or give a new NOT "
            "NULL column a default), or, if every consumer can take it, relax the subject's COMPATIBILITY "
            "rule or move to a new topic; then `cdc restart <connector>`"
        )
    if _RESOLVER_MISSING in (trace or ""):
        return (
            f"the Connect worker lacks the toolkit's Avro schema resolver ({root}); put the "
            "kafka-toolkit-schema-resolver jar (`make connect-plugin`, or `devstack fetch`) in the folder of "
            "Apicurio's AvroConverter on every worker and restart them, or write `registry: {resolver: "
            "apicurio}` in the spec and apply it; then `cdc restart <connector>`"
        )
    if _REGISTRY_CLIENT in (trace or ""):
        url = next((config[k] for k in _REGISTRY_URL_KEYS if config.get(k)), "(not set)")
        return (
            f"the Avro converter could not register or look up a schema in the registry at {url} ({root}); "
            "check that the registry runs and that the spec's registry.url is the address the Connect "
            "worker reaches it at, apply the spec, then `cdc restart <connector>`"
        )
    return root
