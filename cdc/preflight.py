"""Checks against Postgres that Connect's validate does not do (well), run before registering a connector.

With the connector's own credentials (so a wrong password fails here, named), check:
1. the login works and may replicate (REPLICATION or superuser);
2. `wal_level` is `logical`;
3. every included table exists and has a primary key, or `message.key.columns` names existing columns
   for it — a table without a key would produce null-key records, which compacted topics reject;
4. the heartbeat table exists (created here when `create_heartbeat_table` is set, because the
   publication is filtered and Debezium needs it to exist before it starts);
5. every captured column's type, read from the catalog (domains followed to their base type, arrays
   to their element), is one Debezium carries faithfully (`cdc.column_types` decides, column by
   column: refuse, warn, or nothing);
6. when the snapshot reads rows (initial, always, initial_only, when_needed; configuration_based if
   it snapshots data), no captured date column holds a BC date or one in the Julian/Gregorian gap,
   which the snapshot (not streaming) sends wrong. This is the one data query: per table with captured
   date columns, a single scan counting such rows per column (the snapshot reads them all anyway).
Problems (refusals included) are collected and raised together as `PreflightFailed((field, message),
...)`; warnings do not stop anything: `examine` returns them for the CLI to show.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import psycopg
from psycopg import sql

from cdc.column_types import (
    ColumnFacts,
    ColumnFinding,
    ColumnSelection,
    PgType,
    SnapshotDates,
    classify,
    is_date_column,
    money_findings,
    snapshot_date_findings,
    snapshot_reads_data,
)
from cdc.connector_spec import ConnectorSpec
from cdc.errors import PreflightFailed
from cdc.secret_refs import resolve_fields
from kafkakit.errors import ConfigError
from kafkakit.secrets import masked


@dataclass(frozen=True, slots=True, kw_only=True)
class TableFacts:
    table: str
    exists: bool
    primary_key: tuple[str, ...]
    columns: frozenset[str]
    column_types: tuple[ColumnFacts, ...] = ()
    # Counted only when the snapshot reads rows; empty otherwise.
    snapshot_dates: tuple[SnapshotDates, ...] = ()
    # Why the date count could not run (the login may not read the table), or None.
    snapshot_dates_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresFacts:
    wal_level: str
    can_replicate: bool
    tables: tuple[TableFacts, ...]
    # As the connector's login sees it (role and database settings apply): how money is formatted.
    lc_monetary: str = "C"


@dataclass(frozen=True, slots=True, kw_only=True)
class PreflightReport:
    """What `examine` found: problems refuse the connector, warnings are shown and let it through."""

    facts: PostgresFacts
    problems: tuple[tuple[str, str], ...]
    warnings: tuple[ColumnFinding, ...]


def assess(spec: ConnectorSpec, facts: PostgresFacts) -> list[tuple[str, str]]:
    """Problems as (spec field / connector option / column, message) pairs; empty when ready (pure).

    Column refusals (`column_findings` at level refuse) are problems too, named by schema.table.column.
    """
    problems: list[tuple[str, str]] = []
    if facts.wal_level != "logical":
        problems.append(
            (
                "wal_level",
                f"Postgres runs with wal_level={facts.wal_level}; set wal_level=logical "
                "(ALTER SYSTEM SET wal_level = logical) and restart Postgres",
            )
        )
    if not facts.can_replicate:
        problems.append(
            (
                "database.user",
                f"role {spec.database.user!r} may not replicate; ALTER ROLE {spec.database.user} REPLICATION",
            )
        )
    for t in facts.tables:
        if not t.exists:
            problems.append(
                ("table.include.list", f"table {t.table} does not exist in database {spec.database.dbname}")
            )
            continue
        key_columns = spec.key_columns_for(t.table)
        missing = [c for c in key_columns if c not in t.columns]
        if missing:
            problems.append(
                ("message.key.columns", f"table {t.table} has no column(s) {missing} named as key columns")
            )
        elif not t.primary_key and not key_columns:
            problems.append(
                (
                    "table.include.list",
                    f"table {t.table} has no primary key: its change records would have null keys, "
                    "which a compacted topic rejects; add a primary key or list key columns for it "
                    "under message_key_columns",
                )
            )
        if t.snapshot_dates_error is not None and snapshot_reads_data(spec.snapshot_mode, spec.extra):
            problems.append(
                (
                    t.table,
                    f"cannot count the dates the snapshot would send wrong in {t.table}: "
                    f"{t.snapshot_dates_error}; GRANT SELECT ON {t.table} TO {spec.database.user} "
                    "(the snapshot needs it too)",
                )
            )
    problems.extend(f.as_problem() for f in column_findings(spec, facts) if f.level == "refuse")
    return problems


def column_findings(spec: ConnectorSpec, facts: PostgresFacts) -> tuple[ColumnFinding, ...]:
    """Every captured column's findings, refusals and warnings, table by table (pure)."""
    selection = ColumnSelection.from_options(spec.extra)
    reads_data = snapshot_reads_data(spec.snapshot_mode, spec.extra)
    out: list[ColumnFinding] = []
    for t in facts.tables:
        if t.exists:
            out.extend(classify(t.column_types, selection))
            captured_columns = [c for c in t.column_types if selection.captures(t.table, c.column)]
            out.extend(money_findings(captured_columns, facts.lc_monetary, spec.database.user))
            if reads_data:
                captured = [d for d in t.snapshot_dates if selection.captures(t.table, d.column)]
                out.extend(snapshot_date_findings(t.table, captured))
    return tuple(out)


def column_warnings(spec: ConnectorSpec, facts: PostgresFacts) -> tuple[ColumnFinding, ...]:
    """The findings that do not refuse the connector (pure)."""
    return tuple(f for f in column_findings(spec, facts) if f.level == "warn")


def gather(conn: psycopg.Connection[tuple[object, ...]], spec: ConnectorSpec) -> PostgresFacts:
    """Read what `assess` needs: catalog queries, plus one date count per table when the snapshot reads rows."""
    wal_level = str(_one(conn, "SHOW wal_level"))
    can_replicate = bool(
        _one(conn, "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user")
    )
    selection = ColumnSelection.from_options(spec.extra)
    reads_data = snapshot_reads_data(spec.snapshot_mode, spec.extra)
    tables = []
    for table in spec.captured_tables:
        facts = _table_facts(conn, table)
        if facts.exists:
            columns = _column_types(conn, table)
            dates = [c for c in columns if is_date_column(c) and selection.captures(table, c.column)]
            counted, error = _snapshot_dates(conn, table, dates) if reads_data and dates else ((), None)
            facts = TableFacts(
                table=facts.table,
                exists=True,
                primary_key=facts.primary_key,
                columns=facts.columns,
                column_types=columns,
                snapshot_dates=counted,
                snapshot_dates_error=error,
            )
        tables.append(facts)
    return PostgresFacts(
        wal_level=wal_level,
        can_replicate=can_replicate,
        tables=tuple(tables),
        lc_monetary=str(_one(conn, "SHOW lc_monetary")),
    )


def examine(
    spec: ConnectorSpec,
    *,
    create_heartbeat_table: bool = True,
    environ: Mapping[str, str] | None = None,
    at: str | None = None,
) -> PreflightReport:
    """Connect with the spec's credentials, create the heartbeat table if asked, then check everything.

    Config-provider placeholders in the login settings (`${env:NAME}`, `${file:PATH:KEY}`) are
    resolved from `environ` (default: this process's environment) and the files they name, as the
    Connect worker will resolve them. Raises `SecretUnresolved` when one has no value here and
    `PreflightFailed` when the login itself fails; every other problem is in the report.

    `at` ("HOST:PORT"): where this machine reaches the spec's Postgres, when the spec names the address
    the Connect worker uses and that one does not answer here (compose, Kubernetes); the login and the
    database stay the spec's.
    """
    address = parse_address(at) if at else None
    conninfo = spec.preflight_conninfo(lambda login: resolve_fields(login, environ=environ), address)
    try:
        conn = psycopg.connect(**conninfo, connect_timeout=10, autocommit=True)
    except psycopg.OperationalError as exc:
        reason = masked(str(exc).strip().splitlines()[-1])
        where = f"{conninfo['host']}:{conninfo['port']}/{spec.database.dbname}"
        if "SSL" in str(exc) or "certificate" in str(exc):
            field = "database.sslmode/sslrootcert (extra)"
            fix = "fix the TLS settings, or give the server the certificate they ask for"
        elif address is None and any(
            sign in str(exc) for sign in ("resolve host", "translate host name", "Connection refused")
        ):
            field = "database.hostname/database.port"
            fix = (
                "fix the host in the spec; or, where Connect reaches Postgres at another address than this "
                "machine does, give pre-flight this machine's with --preflight-at HOST:PORT"
            )
        else:
            field, fix = "database.user/database.password", "fix the credentials or host in the spec"
        raise PreflightFailed(
            [(field, f"cannot log in to {where} as {spec.database.user!r}: {reason}; {fix}")]
        ) from exc
    with conn:
        if create_heartbeat_table and spec.heartbeat.enabled:
            conn.execute(spec.heartbeat_table_ddl())  # names validated by ConnectorSpec
        facts = gather(conn, spec)
    return PreflightReport(
        facts=facts, problems=tuple(assess(spec, facts)), warnings=column_warnings(spec, facts)
    )


def run_preflight(
    spec: ConnectorSpec,
    *,
    create_heartbeat_table: bool = True,
    environ: Mapping[str, str] | None = None,
    at: str | None = None,
) -> PostgresFacts:
    """`examine`, raising `PreflightFailed` with every problem; warnings are left to `column_warnings`."""
    report = examine(spec, create_heartbeat_table=create_heartbeat_table, environ=environ, at=at)
    if report.problems:
        raise PreflightFailed(report.problems)
    return report.facts


def parse_address(text: str) -> tuple[str, int]:
    """ "HOST:PORT" (a bracketed IPv6 host too) -> (host, port); anything else is refused by name."""
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--preflight-at {text!r} is not HOST:PORT (for example 127.0.0.1:55432)")
    return host, int(port)


def _one(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> object:
    row = conn.execute(sql).fetchone()
    return row[0] if row else None


def _table_facts(conn: psycopg.Connection[tuple[object, ...]], table: str) -> TableFacts:
    schema, name = table.split(".", 1)
    rows = conn.execute(
        """
        SELECT a.attname, coalesce(i.indisprimary, false)
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary AND a.attnum = ANY (i.indkey)
        WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')
        ORDER BY a.attnum
        """,
        (schema, name),
    ).fetchall()
    return TableFacts(
        table=table,
        exists=bool(rows),
        primary_key=tuple(str(r[0]) for r in rows if r[1]),
        columns=frozenset(str(r[0]) for r in rows),
    )


# One row per column: the declared type, the type after following domains, an array's element (domains
# followed too), the declared dimensions (a domain over an array keeps them in typndims), whether it is
# generated, and the validated CHECK constraints that can rule values out: the table's on this column
# alone and its domains' (written with VALUE). A true array is its element's typarray: name, point and
# int2vector have a typelem too, but are types of their own.
_COLUMN_TYPES = """
WITH RECURSIVE
cols AS (
    SELECT a.attrelid, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) AS declared,
           a.attndims, a.attgenerated <> '' AS generated, a.atttypid
    FROM pg_attribute a
    JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = %(schema)s AND c.relname = %(name)s AND a.attnum > 0 AND NOT a.attisdropped
),
dom (attnum, typid, domains) AS (
    SELECT attnum, atttypid, ARRAY[]::oid[] FROM cols
    UNION ALL
    SELECT d.attnum, t.typbasetype, d.domains || t.oid
    FROM dom d JOIN pg_type t ON t.oid = d.typid
    WHERE t.typtype = 'd'
),
base AS (
    SELECT d.attnum, d.domains, t.typname, t.typtype, n.nspname,
           (SELECT e.oid FROM pg_type e WHERE e.oid = t.typelem AND e.typarray = t.oid) AS elem
    FROM dom d JOIN pg_type t ON t.oid = d.typid JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE t.typtype <> 'd'
),
el (attnum, typid) AS (
    SELECT attnum, elem FROM base WHERE elem IS NOT NULL
    UNION ALL
    SELECT e.attnum, t.typbasetype
    FROM el e JOIN pg_type t ON t.oid = e.typid
    WHERE t.typtype = 'd'
),
elbase AS (
    SELECT e.attnum, t.typname, t.typtype, n.nspname
    FROM el e JOIN pg_type t ON t.oid = e.typid JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE t.typtype <> 'd'
)
SELECT c.attname, c.declared, b.typname, b.typtype, b.nspname, e.typname, e.typtype, e.nspname,
       greatest(c.attndims, (SELECT max(t.typndims) FROM pg_type t WHERE t.oid = ANY (b.domains))),
       c.generated,
       ARRAY(
           SELECT pg_get_constraintdef(k.oid)
           FROM pg_constraint k
           WHERE k.contype = 'c' AND k.convalidated
             AND ((k.conrelid = c.attrelid AND k.conkey = ARRAY[c.attnum]) OR k.contypid = ANY (b.domains))
           ORDER BY 1
       )
FROM cols c
JOIN base b ON b.attnum = c.attnum
LEFT JOIN elbase e ON e.attnum = c.attnum
ORDER BY c.attnum
"""


def _column_types(conn: psycopg.Connection[tuple[object, ...]], table: str) -> tuple[ColumnFacts, ...]:
    schema, name = table.split(".", 1)
    rows = conn.execute(_COLUMN_TYPES, {"schema": schema, "name": name}).fetchall()
    return tuple(
        ColumnFacts(
            table=table,
            column=str(r[0]),
            type=str(r[1]),
            base=PgType(str(r[2]), str(r[3]), str(r[4])),
            element=None if r[5] is None else PgType(str(r[5]), str(r[6]), str(r[7])),
            ndims=int(str(r[8] or 0)),
            generated=bool(r[9]),
            checks=tuple(str(c) for c in r[10]) if isinstance(r[10], list) else (),
        )
        for r in rows
    )


_BC = sql.SQL("isfinite({v}) AND {v} < '0001-01-01'")
_GAP = sql.SQL("{v} BETWEEN '1582-10-05' AND '1582-10-14'")


def _snapshot_dates(
    conn: psycopg.Connection[tuple[object, ...]], table: str, columns: list[ColumnFacts]
) -> tuple[tuple[SnapshotDates, ...], str | None]:
    """Count, in one scan, the rows of each date column the snapshot would send wrong.

    BC means before 0001-01-01 but not -infinity (the decoder refuses infinities by name); the gap is
    1582-10-05..14, dates the Gregorian calendar skipped and the snapshot's JDBC reading shifts.
    """
    counts: list[sql.Composable] = []
    for c in columns:
        col = sql.Identifier(c.column)
        for condition in (_BC, _GAP):
            if c.element is None:
                test = condition.format(v=sql.SQL("{}::date").format(col))
            else:  # any element of a date[]
                test = sql.SQL("EXISTS (SELECT FROM unnest({}::date[]) AS u (d) WHERE {})").format(
                    col, condition.format(v=sql.SQL("d"))
                )
            counts.append(sql.SQL("count(*) FILTER (WHERE {})").format(test))
    schema, name = table.split(".", 1)
    query = sql.SQL("SELECT {} FROM {}").format(sql.SQL(", ").join(counts), sql.Identifier(schema, name))
    try:
        row = conn.execute(query).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        return (), str(exc).strip().splitlines()[0]
    values = [int(str(v)) for v in (row or ())]
    return (
        tuple(
            SnapshotDates(column=c.column, type=c.type, bc_rows=values[2 * i], gap_rows=values[2 * i + 1])
            for i, c in enumerate(columns)
        ),
        None,
    )
