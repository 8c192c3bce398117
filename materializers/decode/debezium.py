"""Decode Debezium Postgres change events in the JVM: Connect's JsonConverter with `from_json`, and
Apicurio's AvroConverter (Confluent framing) with `from_avro` (debezium_avro.py), record by record.

Both JsonConverter forms are read, record by record too: with schemas (`schemas.enable=true`, the cdc
package's default) value = {"schema": ..., "payload": {"before", "after", "source": {"lsn", "ts_ms",
...}, "op", "ts_ms"}} and key = {"schema": ..., "payload": {<pk>: ...}}; without (`false`) the value is
the payload itself and the key is {<pk>: ...}. Columns are typed by the materializer's DDL, so the inline
schema is never needed here, and without it a record is several times smaller, which Debezium, Kafka
and this decoder all pay for. A key column named `schema` or
`payload` is read from the enveloped form only (the plain form would be ambiguous).
A delete is followed by a tombstone (null value), which carries nothing a view needs and is dropped
(not dead-lettered). Snapshot reads (op "r") are upserts. The position is `source.lsn`: every change
in the WAL has its own LSN, and a row's later change always has a higher one. Numeric columns arrive
as strings (decimal.handling.mode=string) so no precision is lost on the way to the views. A snapshot
read and the first streamed change of a row can share an LSN; see `positions.cdc` for the tie-break.
Unchanged TOAST values: with REPLICA IDENTITY DEFAULT an update that leaves a large (TOASTed) column
alone reaches Debezium without it, and the connector puts its `unavailable.value.placeholder`
(default `__debezium_unavailable_value`) in `after`. Such a column is named in `keep_fields`, left out
of `set_fields` and null in its data column, so the placeholder never reaches a view. Detection compares
the column's value as a string with the placeholder: text-like columns (text, varchar, json, numeric as
string) and bytea read as `binary` (Spark decodes the base64); an array column holding the placeholder
is not detected.
Exact or refused: `from_json` nulls a value that does not fit its DDL type (NaN or Infinity in a
decimal column, text in an int one, a number past the type's range) without a word, so the value is
parsed with a corrupt-record column and such a record is dead-lettered, naming the DDL, instead.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, ClassVar

from cdc.values import DEFAULT_UNAVAILABLE_PLACEHOLDER
from materializers.decode import avro_columns, debezium_avro, event_shape, positions
from materializers.decode.changes import SOURCE_COLUMNS, source_coordinates

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from materializers.decode.avro_events import WriterSchemas

ROW_OPS = ("c", "u", "r")
# DDL types whose columns skip the TOAST placeholder comparison (the stream plans it every batch): a
# placeholder sent for such a column fails its conversion first (an error row, or null from JSON, as
# before), and a value that prints as a user's placeholder is a value. Spelled as
# `avro_columns.ddl_columns` normalizes a DDL's types (integer -> int, numeric -> decimal).
NEVER_PLACEHOLDER = frozenset({
    "tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "boolean", "date", "timestamp",
    "timestamp_ntz", "timestamp_ltz",
})  # fmt: skip
# The decoder's projections, applied in order: framing, Avro documents, JSON documents, parsed, projected.
_Expressions = tuple[list["Column"], list["Column"], list["Column"], list["Column"], list["Column"]]


ENVELOPE_FIELDS = ("schema", "payload")
# The change's fields the decoder reads, in `change_fields` order (`before` only `with_before`).
CHANGE_FIELDS = ("after", "source", "op", "ts_ms")
CHANGE_FIELDS_WITH_BEFORE = ("after", "before", "source", "op", "ts_ms")
# With `with_before`: the row before the change (null where the source sent none) and Debezium's op.
BEFORE, CHANGE_OP = "_before", "_change_op"
# from_json writes the raw text here when any field does not fit its type (Spark's PERMISSIVE mode).
UNFIT = "_unfit_value"
# The error of a JSON record in a query built to read Avro only (`DebeziumDecoder`): the job decodes it again.
JSON_UNREAD = (
    "a JSON record (no wire header on its key or value) in a query built to read Avro records only; "
    "the job decodes it again reading JSON (call DebeziumDecoder.meet_json where you run the decoder yourself)"
)


def change_fields(data_ddl: str, with_before: bool = False) -> list[str]:
    # `before` only when asked: the latest-state views never read it, and from_json skips what the
    # schema does not name.
    before = [f"before struct<{data_ddl}>"] if with_before else []
    return [
        f"after struct<{data_ddl}>",
        *before,
        "source struct<lsn: long, ts_ms: long>",
        "op string",
        "ts_ms long",
    ]


def value_schema(data_ddl: str, with_before: bool = False) -> str:
    """The enveloped form's `payload` and, beside it, the plain form's top-level fields."""
    change = ", ".join(change_fields(data_ddl, with_before))
    return f"payload struct<{change}>, {change}"


def key_schema(key_column: str) -> str:
    plain = "" if key_column in ENVELOPE_FIELDS else f", `{key_column}` string"
    return f"payload struct<`{key_column}`: string>{plain}"


def _either(doc: Column, fields: tuple[str, ...]) -> Column:
    """The envelope's payload when there is one, else the plain form's fields (null payload: no
    `payload` key, so a schemaless record; a bad record has neither and fails `_error`'s checks)."""
    from pyspark.sql import functions as F

    plain = F.struct(*[doc[f].alias(f) for f in fields])
    return F.when(doc["payload"].isNotNull(), doc["payload"]).otherwise(plain)


def _error(payload: Column, entity: Column, unfit: Column, first: debezium_avro.Branches) -> Column:
    """Why a record is not a change (null: it is one); the Avro form's own reasons (`first`) first."""
    from pyspark.sql import functions as F

    op = payload["op"]
    branches = [
        *first,
        (payload.isNull() | op.isNull(), F.lit("value is not a Debezium change event in JSON")),
        (~op.isin("c", "u", "r", "d"), F.concat(F.lit("unsupported Debezium op "), op)),
        (payload["source"]["lsn"].isNull(), F.lit("source.lsn is missing")),
        (entity.isNull(), F.lit("the record key has no primary-key payload")),
        (op.isin(*ROW_OPS) & payload["after"].isNull(), F.lit("'after' is missing for a row change")),
        (unfit.isNotNull(), unfit),
    ]
    return debezium_avro.cases(branches)


def _or_else(avro: debezium_avro.Branches, framed: str, json: Column | None) -> Column:
    """The Avro form's branches, then an unframed record's JSON form (`json`; None: not read)."""
    from pyspark.sql import functions as F

    return debezium_avro.cases([*avro, *([(~F.col(framed), json)] if json is not None else [])])


def _kept_apart(document: str) -> Column:
    """An Avro document carried past the JSON projection, read twice so that Spark's CollapseProject
    does not merge the two projections (it inlines an expensive expression read once). `from_json` has
    no generated code (CodegenFallback), so a projection holding it runs interpreted, generating its
    code in every task, and `from_avro` evaluated there builds its options per task: each a new Hadoop
    Configuration parsing Hadoop's XML defaults per writer schema. Apart, the `from_avro`
    projection is whole-stage generated on the driver, its options shipped with it."""
    from pyspark.sql import functions as F

    return F.when(F.col(document).isNotNull(), F.col(document)).alias(document)


def unfit_message(data_ddl: str) -> str:
    return (
        f"a value does not fit its column's type in the materializer's DDL ({data_ddl}); "
        "declare the column string to keep it exactly, or keep such values out of the source"
    )


@dataclass(slots=True)
class DebeziumDecoder:
    """A job's Debezium decoder (a `Transform`): the decoded frame (see changes.py) of raw Kafka rows
    (key, value, topic, partition, offset, ...), plus `schema_id` (debezium_avro.py) for the job to
    learn new writer schemas from.

    The Spark expressions are built for the writer schemas known so far and reused while no new one
    appears: they name columns only, so they bind to every batch alike. `unavailable_placeholder` must
    match the connector's `unavailable.value.placeholder`. Without `schemas` only JSON is read (an Avro
    record is then an error row).

    `with_before` adds `BEFORE` (the `before` row as a struct of the data columns, as sent: a TOAST
    placeholder is not nulled there) and `CHANGE_OP` (c, u, d or r), for views that take a row's old
    contribution back (aggregate views over CDC).

    Knowing writer schemas, it reads Avro records only until it meets a JSON one (a topic whose
    connector moved from JSON to Avro): `from_json` has no generated code, so a JSON reader in the
    query split its whole-stage code in two, an interpreted projection between them copying every
    row (without it, a live batch decodes in about a fifth less time). Until then a JSON
    record (key or value without the wire header) is an error row with `schema_id`
    `event_shape.UNFRAMED_ID`, which the job learns from as from a new writer schema (`meet_json`):
    it decodes such records again and restarts its query reading both. `json_before_met` reads JSON
    from the start (a query that is never rebuilt: the aggregate job's).
    """

    # Debezium's context headers (connector name, task, run id) carry nothing the decode reads.
    reads_headers: ClassVar[bool] = False
    data_columns: tuple[str, ...]
    data_ddl: str
    key_column: str
    unavailable_placeholder: str = DEFAULT_UNAVAILABLE_PLACEHOLDER
    with_before: bool = False
    json_before_met: bool = False
    _json_met: bool = field(default=False, init=False, repr=False)
    # (writer schema ids, reads JSON) -> the expressions built for them
    _built: dict[tuple[tuple[int, ...], bool], _Expressions] = field(
        default_factory=dict, init=False, repr=False
    )

    def __call__(self, df: DataFrame, schemas: WriterSchemas | None = None) -> DataFrame:
        present = df.where(df["value"].isNotNull())
        texts = debezium_avro.writer_schemas(present, schemas) if schemas is not None else {}
        built = (tuple(sorted(texts)), self.json_before_met or self._json_met or not texts)
        if built not in self._built:
            self._built = {built: self._build(texts, json=built[1])}  # only the newest is used again
        framing, avro_documents, json_documents, parsed, projected = self._built[built]
        framed = present.select(*framing)
        read = framed.select(*avro_documents) if avro_documents else framed  # JSON only: no projection
        read = read.select(*json_documents) if json_documents else read  # Avro only: none
        return read.select(*parsed).select(*projected)

    @property
    def reads_json(self) -> bool:
        """Whether the decode built last reads JSON records."""
        return any(json for _, json in self._built)

    @property
    def json_met(self) -> bool:
        """Whether `meet_json` was called: a decode built from now on reads JSON records."""
        return self._json_met

    def meet_json(self) -> None:
        """Read JSON records from now on (the job met one: `event_shape.UNFRAMED_ID`)."""
        self._json_met = True

    def _build(self, texts: Mapping[int, str], *, json: bool) -> _Expressions:
        from pyspark.sql import functions as F

        data_columns, key_column = self.data_columns, self.key_column
        avro = debezium_avro.AvroForms(texts, data_columns, self.data_ddl, key_column, self.with_before)
        framing = [*[F.col(c) for c in SOURCE_COLUMNS], *debezium_avro.framing()]
        carried_over = [F.col(c) for c in (*SOURCE_COLUMNS, *debezium_avro.FRAMING)]
        avro_documents = avro.documents()
        avro_change, avro_unfit = avro.change()
        avro_error, schema_id = avro.error(F.col("p.op"), F.col("entity")), avro.schema_id()
        if json:
            json_documents, json_change, json_entity, json_unfit = self._json_reader(
                avro.document_names(), carried_over
            )
        else:
            json_documents, json_change, json_entity, json_unfit = [], None, None, None
            unframed = ~F.col("_vf") | (F.col("key").isNotNull() & ~F.col("_kf"))
            avro_error = [(unframed, F.lit(JSON_UNREAD)), *avro_error]
            schema_id = F.when(unframed, F.lit(event_shape.UNFRAMED_ID).cast("long")).otherwise(schema_id)
        parsed = [
            *carried_over,
            _or_else(avro_change, "_vf", json_change).alias("p"),
            _or_else(avro.entity(), "_kf", json_entity).alias("entity"),
            _or_else(avro_unfit, "_vf", json_unfit).alias(UNFIT),
        ]
        deleted = F.col("p.op") == "d"
        ddl = avro_columns.ddl_columns(self.data_ddl)
        # null for a delete (no `after`), so a delete keeps nothing. Only a column held as text, bytes
        # or a structure is compared with the placeholder (NEVER_PLACEHOLDER says why).
        after = {c: F.col(f"p.after.`{c}`") for c in data_columns}
        unavailable = {
            c: after[c].cast("string") == self.unavailable_placeholder
            for c in data_columns
            if ddl[c].partition("(")[0] not in NEVER_PLACEHOLDER
        }
        hidden = {c: deleted | unavailable[c] if c in unavailable else deleted for c in data_columns}
        carried = {c: F.when(hidden[c], F.lit(None)).otherwise(after[c]) for c in data_columns}
        # No lambdas (filter/map_filter): Spark interprets them row by row, which cost a fifth of the
        # decoding. array_except drops the nulls; a null in set_fields means "not set" (changes.py).
        # It builds a hash set per row, so only a change that carries a placeholder goes through it.
        keep = F.when(
            reduce(operator.or_, unavailable.values(), F.lit(False)),
            F.array_except(
                F.array(*[F.when(flag, F.lit(c)) for c, flag in unavailable.items()]).cast("array<string>"),
                F.array(F.lit(None).cast("string")),
            ),
        ).otherwise(F.array().cast("array<string>"))
        fields = F.map_from_arrays(
            F.array(*[F.lit(c) for c in data_columns]),
            F.array(*[carried[c].cast("string") for c in data_columns]),
        )
        entity = F.col("entity")
        projected = [
            entity,
            # == positions.cdc(lsn, snapshot=op == "r")
            F.concat(
                F.lpad(F.col("p.source.lsn").cast("string"), positions.WIDTH, "0"),
                F.when(F.col("p.op") == "r", F.lit("0")).otherwise(F.lit("1")),
            ).alias("position"),
            F.when(deleted, F.lit("delete")).otherwise(F.lit("upsert")).alias("op"),
            F.when(deleted, F.create_map().cast("map<string,string>")).otherwise(fields).alias("set_fields"),
            F.array().cast("array<string>").alias("del_fields"),
            keep.alias("keep_fields"),
            F.timestamp_millis(F.coalesce(F.col("p.source.ts_ms"), F.col("p.ts_ms"))).alias("event_ts"),
            *source_coordinates(_error(F.col("p"), entity, F.col(UNFIT), avro_error)),
            *[carried[c].alias(c) for c in data_columns],
            schema_id.alias("schema_id"),
            *([F.col("p.before").alias(BEFORE), F.col("p.op").alias(CHANGE_OP)] if self.with_before else []),
        ]
        avro_projection = [*carried_over, *avro_documents] if avro_documents else []
        return framing, avro_projection, json_documents, parsed, projected

    def _json_reader(
        self, avro_documents: list[str], carried_over: list[Column]
    ) -> tuple[list[Column], Column, Column, Column]:
        """The JSON documents' projection (`carried_over` and the Avro documents passed through), and
        what an unframed record's change, entity and unfit-value message are read from there."""
        from pyspark.sql import functions as F

        key_column = self.key_column
        # Parsed in a projection of their own, then read by name: a field read straight off
        # `from_json(...)` is rewritten by Spark (enableJsonExpressionOptimization) into a from_json
        # of that field alone, so the value and the key were each parsed twice.
        # Each record is parsed by one reader only: a framed one reaches from_json as null (a CASE
        # around from_json instead slowed JSON decoding down).
        json_key = F.from_json(F.when(~F.col("_kf"), F.col("key").cast("string")), key_schema(key_column))
        documents = [
            *carried_over,
            *[_kept_apart(d) for d in avro_documents],
            F.from_json(
                F.when(~F.col("_vf"), F.col("value").cast("string")),
                f"{value_schema(self.data_ddl, self.with_before)}, `{UNFIT}` string",
                {"columnNameOfCorruptRecord": UNFIT},
            ).alias("_value"),
            json_key.alias("_key"),
        ]
        value, key = F.col("_value"), F.col("_key")
        plain_key = key[key_column] if key_column not in ENVELOPE_FIELDS else F.lit(None)
        return (
            documents,
            _either(value, self._change_fields()),
            F.coalesce(key["payload"][key_column], plain_key),
            F.when(value[UNFIT].isNotNull(), F.lit(unfit_message(self.data_ddl))),
        )

    def _change_fields(self) -> tuple[str, ...]:
        return CHANGE_FIELDS_WITH_BEFORE if self.with_before else CHANGE_FIELDS
