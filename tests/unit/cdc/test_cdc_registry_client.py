"""The registry adapter: writer schemas by id, cached and bounded; an unknown id vs a registry away."""

from __future__ import annotations

import json

import httpx
import pytest

from cdc.errors import RegistryUnavailable, SchemaNotFound
from cdc.failures import failure_cause
from cdc.registry_client import RegistryClient, ccompat_url

_SCHEMA = json.dumps(
    {"type": "record", "name": "Key", "namespace": "p.public.t", "fields": [{"name": "id", "type": "int"}]}
)


def _registry(calls: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        schema_id = int(request.url.path.rsplit("/", 1)[1])
        if schema_id >= 100:
            return httpx.Response(
                404, json={"message": f"Schema {schema_id} not found.", "error_code": 40403}
            )
        return httpx.Response(200, json={"schema": _SCHEMA})

    return httpx.MockTransport(handle)


def test_schemas_are_fetched_once_per_id_and_the_cache_is_bounded() -> None:
    calls: list[str] = []
    with RegistryClient("http://r:8080", cache_size=2, transport=_registry(calls)) as registry:
        first = registry(1)
        assert registry(1) is first and calls == ["/apis/ccompat/v7/schemas/ids/1"]
        assert first.connect["fields"] == [{"type": "int32", "optional": False, "field": "id"}]
        registry(2)
        registry(3)  # evicts 1, the least recently used
        registry(1)
    assert calls[-1] == "/apis/ccompat/v7/schemas/ids/1" and len(calls) == 4


def test_an_unknown_id_is_the_records_problem() -> None:
    registry = RegistryClient("http://r:8080/apis/ccompat/v7", transport=_registry([]))
    with (
        registry,
        pytest.raises(SchemaNotFound, match="schema id 100 is not in the registry at http://r:8080"),
    ):
        registry(100)


def test_a_registry_that_does_not_answer_is_unavailable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    registry = RegistryClient("http://r:9", transport=httpx.MockTransport(refuse))
    with registry, pytest.raises(RegistryUnavailable, match=r"did not answer .*--registry-url"):
        registry(1)


def test_ccompat_url() -> None:
    assert ccompat_url("http://r:8080/") == "http://r:8080/apis/ccompat/v7"
    assert ccompat_url("http://r:8080/apis/ccompat/v7") == "http://r:8080/apis/ccompat/v7"


_REGISTRY_TRACE = """org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler
\tat org.apache.kafka.connect.runtime.errors.RetryWithToleranceOperator.execAndHandleError(RetryWithToleranceOperator.java:260)
Caused by: io.apicurio.registry.rest.client.exception.RestClientException
\tat io.apicurio.registry.rest.client.impl.ErrorHandler.parseError(ErrorHandler.java:95)
\t... 13 more"""


def test_a_failed_task_is_explained_by_its_root_cause_and_the_registry_named() -> None:
    config = {"value.converter.apicurio.registry.url": "http://wrong:9/apis/registry/v2"}
    cause = failure_cause(_REGISTRY_TRACE, config)
    assert cause is not None and "registry at http://wrong:9/apis/registry/v2" in cause
    assert "RestClientException" in cause and "registry.url" in cause
    plain = "java.lang.RuntimeException: outer\nCaused by: org.x.DataException: field no_such_field not found"
    assert failure_cause(plain, {}) == "org.x.DataException: field no_such_field not found"
    assert failure_cause(None, {}) is None


def test_a_worker_without_the_toolkits_resolver_is_told_both_ways_out() -> None:
    trace = (
        "java.lang.RuntimeException: java.lang.ClassNotFoundException: kafkatoolkit.registry.SchemaIdentityResolver\n"
        "\tat io.apicurio.registry.resolver.utils.Utils.loadClass(Utils.java:35)\n"
        "Caused by: java.lang.ClassNotFoundException: kafkatoolkit.registry.SchemaIdentityResolver\n"
        "\tat java.base/java.net.URLClassLoader.findClass(URLClassLoader.java:445)"
    )
    cause = failure_cause(trace, {"value.converter.apicurio.registry.url": "http://r/apis/registry/v2"})
    assert cause is not None and cause.startswith(
        "the Connect worker lacks the toolkit's Avro schema resolver"
    )
    assert "kafka-toolkit-schema-resolver jar" in cause and "resolver: apicurio" in cause
