"""Postgres read-model view: one row per entity in a table of your database, kept through the View
protocol alone (the job knows nothing of it).

Table `<table>`: `key` (primary key), `position` (COLLATE "C": positions are fixed-width strings
compared byte-wise), `deleted`, one text column per data column, and `carried` (jsonb: per data
column, the position the last write carried its value at).
Commit order for a batch (driver; one transaction):
1. fold the batch to each entity's newest change, and per data column the newest value a change
   carried (`changes.newest_indices`: a column the source did not send, Debezium's unchanged TOAST
   value, keeps the row's value);
2. small batches: `INSERT ... VALUES` per entity; larger ones: `COPY` into a temporary staging table,
   then one `INSERT ... SELECT` — both `ON CONFLICT (key) DO UPDATE ... WHERE t.position <
   EXCLUDED.position`: a replayed, duplicated or late change never overwrites a newer one;
3. a delete writes a tombstone (deleted, its position, null data), so an older change arriving later
   cannot resurrect the row; readers filter `NOT deleted`;
4. commit. A crash before it leaves the table as it was; a re-run applies the same changes again,
   which the position guard skips where they were already applied.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from materializers.decode.changes import newest_indices
from materializers.errors import ViewUnavailable
from materializers.truth import Difference, Truth, compare
from materializers.view import DriverView, Reject, TableBatch, ViewContext

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession


COPY_ROWS = 1000  # above this many entities a batch goes through COPY and a staging table


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """An entity's newest state in a batch: `values[c]` carried at `carried[c]` (absent: not carried)."""

    key: str
    position: str
    deleted: bool
    values: dict[str, str | None]
    carried: dict[str, str]


def batch_rows(table_rows: Sequence[dict[str, Any]], data_columns: tuple[str, ...]) -> list[Row]:
    """The batch folded to one Row per entity (pure)."""
    found = newest_indices(
        [r["entity"] for r in table_rows],
        [r["position"] for r in table_rows],
        [r["keep_fields"] for r in table_rows],
        data_columns,
    )
    rows = []
    for n, i in enumerate(found.rows):
        newest = table_rows[i]
        deleted = newest["op"] == "delete"
        carriers = {c: table_rows[k] for c in data_columns if (k := found.carriers[c][n]) is not None}
        rows.append(
            Row(
                key=newest["entity"],
                position=newest["position"],
                deleted=deleted,
                values={c: None if deleted else _text(r[c]) for c, r in carriers.items()},
                carried={c: r["position"] for c, r in carriers.items()},
            )
        )
    return rows


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def upsert_sql(table: str, data_columns: tuple[str, ...], source: str) -> str:
    """The guarded upsert from `source` (a VALUES row or a SELECT) into `table` (pure). A data column
    takes the incoming value only where the batch carried it at a position newer than the row's."""
    cols = ", ".join(_ident(c) for c in data_columns)
    kept = ", ".join(
        f"{_ident(c)} = CASE WHEN (EXCLUDED.carried ->> {_literal(c)}) IS NULL "
        f'OR (EXCLUDED.carried ->> {_literal(c)}) COLLATE "C" <= t.position '
        f"THEN t.{_ident(c)} ELSE EXCLUDED.{_ident(c)} END"
        for c in data_columns
    )
    return (
        f"INSERT INTO {table} AS t (key, position, deleted, carried, {cols}) {source} "
        f"ON CONFLICT (key) DO UPDATE SET position = EXCLUDED.position, deleted = EXCLUDED.deleted, "
        f"carried = EXCLUDED.carried, {kept} WHERE t.position < EXCLUDED.position"
    )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class PostgresTable(DriverView):
    """A read-model table in Postgres (see the module docstring). `table` may be schema-qualified."""

    single_pass = False
    parallel = False

    def __init__(self, dsn: str, table: str, data_columns: tuple[str, ...], name: str = "postgres") -> None:
        self.dsn, self.table, self.data_columns, self._name = dsn, table, data_columns, name
        self._conn: psycopg.Connection[Any] | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def qualified(self) -> str:
        return ".".join(_ident(part) for part in self.table.split("."))

    def columns(self) -> tuple[str, ...]:
        return ("entity", "position", "op", "keep_fields", *self.data_columns)

    def connection(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._conn is None or self._conn.closed:
            try:
                self._conn = psycopg.connect(self.dsn)
            except psycopg.Error as exc:
                raise ViewUnavailable(
                    f"Postgres at {self.dsn.split('@')[-1]} does not answer for view {self.name!r} ({exc}); "
                    "start it or point PG_DSN at it"
                ) from exc
        return self._conn

    def check(self) -> None:
        self.connection().execute("SELECT 1")
        self.connection().rollback()

    def prepare(self, spark: SparkSession) -> None:
        data = ", ".join(f"{_ident(c)} text" for c in self.data_columns)
        conn = self.connection()
        with conn.transaction():
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS {self.qualified} (key text PRIMARY KEY, position text COLLATE "C" '
                f"NOT NULL, deleted boolean NOT NULL, carried jsonb NOT NULL, {data})"
            )

    def apply_table(self, batch: TableBatch) -> Sequence[Reject]:
        rows = batch_rows(batch.table.select(list(self.columns())).to_pylist(), self.data_columns)
        conn = self.connection()
        with conn.transaction():
            (self._copy if len(rows) > COPY_ROWS else self._insert)(conn, rows)
        return ()

    def _insert(self, conn: psycopg.Connection[Any], rows: list[Row]) -> None:
        marks = ", ".join(["%s"] * (4 + len(self.data_columns)))
        sql = upsert_sql(self.qualified, self.data_columns, f"VALUES ({marks})")
        with conn.cursor() as cur:
            cur.executemany(sql, [self._params(r) for r in rows])

    def _copy(self, conn: psycopg.Connection[Any], rows: list[Row]) -> None:
        """COPY into a staging table dropped at commit, then one guarded upsert from it."""
        cols = ", ".join(_ident(c) for c in self.data_columns)
        conn.execute(
            f"CREATE TEMP TABLE mv_staging ON COMMIT DROP AS SELECT key, position, deleted, carried, {cols} "
            f"FROM {self.qualified} WITH NO DATA"
        )
        with conn.cursor() as cur:
            with cur.copy(f"COPY mv_staging (key, position, deleted, carried, {cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(self._params(row))
            cur.execute(upsert_sql(self.qualified, self.data_columns, "SELECT * FROM mv_staging"))

    def _params(self, row: Row) -> tuple[object, ...]:
        return (
            row.key,
            row.position,
            row.deleted,
            json.dumps(row.carried),
            *[row.values.get(c) for c in self.data_columns],
        )

    def live_rows(self) -> dict[str, dict[str, str]]:
        """Every live row's non-null data columns as text (tombstones left out)."""
        cols = ", ".join(_ident(c) for c in self.data_columns)
        conn = self.connection()
        found = conn.execute(f"SELECT key, {cols} FROM {self.qualified} WHERE NOT deleted").fetchall()
        conn.rollback()
        return {
            str(r[0]): {c: v for c, v in zip(self.data_columns, r[1:], strict=True) if v is not None}
            for r in found
        }

    def verify(self, truth: Truth) -> list[Difference]:
        """A CDC read model: its live rows against the source table. An event fold's state is not a
        row of data columns, so there is nothing to compare for events."""
        return compare(self.name, truth.rows, self.live_rows()) if truth.kind == "cdc" else []


def read_model(table: str = "", name: str = "postgres") -> Callable[[ViewContext], PostgresTable]:
    """A factory for `Materializer(views=...)`: the table (default `mv_<materializer>`, plus the
    generation after a rebuild) in the run's Postgres (PG_DSN)."""

    def build(job: ViewContext) -> PostgresTable:
        default = f"mv_{job.name}" + (f"_{job.generation}" if job.generation else "")
        return PostgresTable(job.config.endpoints.pg_dsn, table or default, job.data_columns, name)

    return build
