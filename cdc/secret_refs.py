"""Connector secrets as Kafka config-provider placeholders: Connect stores the reference, not the secret.

A spec may write a secret field (`database.password`, any `extra` value) as a reference:

    password: {env: PG_PASSWORD}                       # -> ${env:PG_PASSWORD}
    password: {file: /etc/cdc/pg.properties, key: password}  # -> ${file:/etc/cdc/pg.properties:password}

or as the placeholder text itself. Connect receives the placeholder (Kafka's `EnvVarConfigProvider` /
`FileConfigProvider` syntax, `${provider:[path:]key}`); the worker resolves it when it starts the
connector, so its config topic and `GET /connectors/NAME/config` hold the reference only. The worker
must enable the providers (`config.providers=env,file`, README "Security"; both local stacks do).

Pre-flight logs in as the connector will, so it resolves the same placeholders here (`resolve_fields`),
from this process's environment and files. Assumptions: the variable is set, and the file readable, at
the same name and path on this machine and on the Connect worker (a container mounts the file at the
same path); a file is a Java properties file, as FileConfigProvider reads it.

Guarantees: a reference that is malformed is refused when the spec is loaded (`SpecError`); one that
cannot be resolved (unset variable, missing file or key, a provider other than env/file) is refused by
pre-flight, before anything is sent to Connect (`SecretUnresolved`, naming the field and the fix).
No message carries a resolved value. Parsing and rendering are pure; `resolve_fields` reads the
environment and files it is given access to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cdc.errors import SecretUnresolved, SpecError
from kafkakit.java_client import parse_properties

# Kafka's ConfigTransformer pattern (org.apache.kafka.common.config.ConfigTransformer.DEFAULT_PATTERN):
# ${provider:[path:]key}, anywhere in a value, each occurrence substituted.
PLACEHOLDER = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
PROVIDERS = ("env", "file")
REFERENCE_FORMS = "{env: NAME} or {file: /absolute/path, key: KEY}"


def reference_text(value: Mapping[str, Any], where: str) -> str:
    """The placeholder a spec's reference mapping stands for; a malformed one is refused (pure)."""
    keys = set(value)
    if keys == {"env"}:
        name = value["env"]
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SpecError(f"{where}: env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*)")
        return "${env:" + name + "}"
    if keys == {"file", "key"}:
        path, key = value["file"], value["key"]
        if not isinstance(path, str) or not path.startswith("/") or ":" in path or "}" in path:
            raise SpecError(
                f"{where}: file must be an absolute path without ':' or '}}' (the Connect worker reads it "
                "from its own working directory, so a relative path would name another file)"
            )
        if not isinstance(key, str) or not key or "}" in key:
            raise SpecError(f"{where}: key must name a property of the file (no '}}')")
        return "${file:" + path + ":" + key + "}"
    raise SpecError(f"{where}: a secret reference is {REFERENCE_FORMS}, got the keys {sorted(keys)}")


def placeholders(text: str) -> list[str]:
    """Every placeholder in `text`, as written (pure)."""
    return [m.group(0) for m in PLACEHOLDER.finditer(text)]


def resolve_fields(
    fields: Mapping[str, str],
    *,
    environ: Mapping[str, str] | None = None,
    read_text: Callable[[str], str] | None = None,
) -> dict[str, str]:
    """`fields` (connector option -> value) with every placeholder replaced by its value, as the Connect
    worker's providers will; every field that cannot be resolved is named in one `SecretUnresolved`."""
    env = os.environ if environ is None else environ
    read = _read_text if read_text is None else read_text
    problems: list[tuple[str, str]] = []
    resolved = {}
    for field, value in fields.items():
        failures: list[str] = []

        def one(match: re.Match[str], field: str = field, failures: list[str] = failures) -> str:
            try:
                return _resolve(match, env, read)
            except _Unresolved as exc:
                failures.append(f"{match.group(0)} {exc}")
                return match.group(0)

        resolved[field] = PLACEHOLDER.sub(one, value)
        problems.extend((field, failure) for failure in failures)
    if problems:
        raise SecretUnresolved(problems)
    return resolved


class _Unresolved(Exception):
    """Why one placeholder has no value here (the text says what to do)."""


def _resolve(match: re.Match[str], env: Mapping[str, str], read: Callable[[str], str]) -> str:
    provider, path, key = match.group(1), match.group(3), match.group(4)
    if provider == "env":
        if path is not None:
            raise _Unresolved("has a path, which EnvVarConfigProvider does not take: write ${env:NAME}")
        if key not in env:
            raise _Unresolved(
                f"names the environment variable {key}, which is not set here: export {key} (the Connect "
                "worker needs it too), or run with --skip-preflight"
            )
        return env[key]
    if provider == "file":
        if path is None:
            raise _Unresolved("names no file: write ${file:/absolute/path:KEY}")
        try:
            props = parse_properties(read(path))
        except OSError as exc:
            raise _Unresolved(
                f"names the file {path}, which cannot be read here ({exc.strerror}): create it as a "
                f"properties file with a line `{key}=...`, readable by the Connect worker too, or fix "
                "the path"
            ) from None
        if key not in props:
            raise _Unresolved(f"names the key {key}, which {path} does not have: add a line `{key}=...`")
        return props[key]
    raise _Unresolved(
        f"uses the config provider {provider!r}, which pre-flight cannot resolve (only "
        f"{', '.join(PROVIDERS)}): run with --skip-preflight, or use {REFERENCE_FORMS}"
    )


def _read_text(path: str) -> str:
    # FileConfigProvider reads the file as UTF-8 (Files.newBufferedReader)
    return Path(path).read_text(encoding="utf-8")
