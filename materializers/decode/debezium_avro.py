"""The Avro half of `debezium.DebeziumDecoder`: Debezium change records in Confluent framing, decoded in the JVM.

Apicurio's Connect AvroConverter writes key and value each as magic byte 0, a 4-byte big-endian registry
id (its own for the key) and the Avro body. Per record, a value (or key) with that framing is read here,
any other with `from_json` (debezium.py): a topic that changes format mid-stream still decodes.

Guarantees, as the JSON path's:
- no Python per record: the 5-byte header is cut off and the body read by `from_avro` with its writer
  schema (PERMISSIVE: a body that does not decode is an error row, not a failed batch), one `from_avro`
  per known writer schema id under a CASE on the id, so each body is parsed once, with its own schema;
  a change with no `before` and an `after` (inserts, snapshot reads, updates without REPLICA
  IDENTITY FULL) by the flat form of its schema (`avro_columns.flat_envelope`), the others nested;
- values are turned into the materializer's DDL types by Debezium's semantic type (`avro_columns`), and
  a value that does not fit its column (out of range, a digit lost, a refused source type) makes its
  record an error row naming the DDL and the column, never a silent null or a rounded value;
- a new writer schema mid-stream (ALTER TABLE ADD/DROP COLUMN: a new id) needs no restart: the job
  learns the id from the `schema_id` column (`WriterSchemas.trusting_cache`/`learn`) or asks the batch
  for its ids, and the CASE picks each record's schema; a DDL column the writer schema lacks is null;
- an id the registry does not know, a body that does not decode, an envelope-less schema: error rows
  (dead letters with the record's topic/partition/offset); the job goes on.
Assumes the connector's `field.name.adjustment.mode=avro` (the cdc spec's for Avro): a column's Avro
field name is its name with characters outside [A-Za-z0-9_] replaced by `_` (`avro_columns.avro_name`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from materializers.decode import avro_columns, event_shape, spark_avro
from materializers.decode.avro_columns import Conversion, SourceField
from materializers.decode.avro_events import NOT_KNOWN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from materializers.decode.avro_events import WriterSchemas

# Columns of the decoder's first projection: whether value/key are framed, and their ids' 4 bytes
# (compared as bytes: Spark turns bytes into a number only by hex text and `conv`, a visible share of a
# backfill's decode when every record paid for it; only an error's message and `schema_id` do).
FRAMING = ("_vf", "_vid", "_kf", "_kid")
# Microsecond timestamps hold +-2^63 us: millis beyond this overflow (Spark would fail the batch).
_MAX_MILLIS = (2**63 - 1) // 1000
_INTEGRAL = ("tinyint", "smallint", "int", "bigint")
_NUMERIC = (*_INTEGRAL, "float", "double", "decimal")
FLAT = "f"  # the suffix of an envelope's flat document column (`_v<id>f`)
Branches = list[tuple["Column", "Column"]]  # a CASE's (condition, value) pairs, in order


def framing() -> list[Column]:
    from pyspark.sql import functions as F

    value, key = (
        event_shape.has_wire_header("value"),
        F.coalesce(event_shape.has_wire_header("key"), F.lit(False)),
    )
    return [  # the ids only of framed records: a JSON record pays for one byte comparison
        value.alias("_vf"),
        F.when(value, event_shape.schema_id_bytes("value")).alias("_vid"),
        key.alias("_kf"),
        F.when(key, event_shape.schema_id_bytes("key")).alias("_kid"),
    ]


def writer_schemas(df: DataFrame, schemas: WriterSchemas) -> dict[int, str]:
    """Every writer schema known to `schemas`; without `assume_known`, the batch's ids are asked for
    first (one small Spark job over the framed records: their distinct ids)."""
    from pyspark.sql import functions as F

    if not schemas.assume_known:
        framed = df.select(*framing(), "key", "value").where("_vf OR _kf")
        both = F.array(
            F.when(F.col("_vf"), event_shape.schema_id("value")),
            F.when(F.col("_kf"), event_shape.schema_id("key")),
        )
        ids = framed.select(F.explode(both).alias("id")).where("id IS NOT NULL").distinct()
        schemas.learn(int(r["id"]) for r in ids.collect())
    return schemas.known()


@dataclass(frozen=True, slots=True)
class AvroForms:
    """The expressions reading Avro keys and values with the writer schemas `texts` (id -> text)."""

    texts: Mapping[int, str]
    data_columns: tuple[str, ...]
    data_ddl: str
    key_column: str
    with_before: bool = False  # also read `before`, as a struct like `after`
    # Each envelope's flat (writer, reader) schemas (`avro_columns.flat_envelope`; None: it has none).
    flats: Mapping[int, tuple[str, str] | None] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        row = self._row_names()
        flats = {sid: avro_columns.flat_envelope(self.texts[sid], row) for sid in self.envelopes}
        object.__setattr__(self, "flats", flats)

    @property
    def envelopes(self) -> list[int]:
        return sorted(i for i, t in self.texts.items() if avro_columns.is_envelope(t))

    @property
    def keys(self) -> list[int]:
        return sorted(set(self.texts) - set(self.envelopes))

    def documents(self) -> list[Column]:
        """One `from_avro` per writer schema, each evaluated only for the records of its id; an
        envelope with a flat form (`avro_columns.flat_envelope`) reads the bodies that start with
        FLAT_PREFIX flat, the others nested: each body is parsed once."""
        from pyspark.sql import functions as F

        flat_prefix = F.substring(
            "value", event_shape.HEADER_SIZE + 1, len(avro_columns.FLAT_PREFIX)
        ) == F.lit(avro_columns.FLAT_PREFIX)

        def read(side: str, sid: int, flat: bool) -> Column:
            column = "value" if side == "v" else "key"
            framed = F.col(f"_{side}f") & (F.col(f"_{side}id") == event_shape.schema_id_literal(sid))
            body = event_shape.avro_body(column)
            flat_form = self.flats.get(sid) if side == "v" else None
            if flat and flat_form is not None:
                return F.when(framed & flat_prefix, spark_avro.from_avro(body, *flat_form))
            text = avro_columns.reader_schema(self.texts[sid])
            # only what the change is read from (avro_columns.envelope_reader says why)
            reader = avro_columns.envelope_reader(self.texts[sid], self._row_names()) if side == "v" else None
            nested = framed & ~flat_prefix if flat_form else framed
            return F.when(nested, spark_avro.from_avro(body, text, reader))

        return [read(side, sid, flat).alias(name) for name, side, sid, flat in self._named()]

    def document_names(self) -> list[str]:
        """The columns `documents` names, in its order."""
        return [name for name, _, _, _ in self._named()]

    def _named(self) -> list[tuple[str, str, int, bool]]:
        """(column, side, writer schema id, flat) of each document: values (`v`) first, each
        envelope's flat form after it (`<column>` + FLAT), then keys (`k`)."""
        values = [
            (f"_v{sid}{FLAT if flat else ''}", "v", sid, flat)
            for sid in self.envelopes
            for flat in (False, *((True,) if self.flats[sid] else ()))
        ]
        return [*values, *((f"_k{sid}", "k", sid, False) for sid in self.keys)]

    def _row_names(self) -> list[str]:
        return [avro_columns.avro_name(c) for c in self.data_columns]

    def change(self) -> tuple[Branches, Branches]:
        """(the change as the JSON path's `p` struct, the unfit-value message) of a framed value, as
        CASE branches (condition, value)."""
        changes = {sid: self._change_of(sid) for sid in self.envelopes}
        return (
            [(_is("_vid", sid) & read, p) for sid, (read, p, _) in changes.items()],
            [(_is("_vid", sid), message) for sid, (_, _, message) in changes.items()],
        )

    def _change_of(self, sid: int) -> tuple[Column, Column, Column]:
        from pyspark.sql import functions as F

        after, message = self._row_of(sid, "after")
        rows = [after.alias("after")]
        if self.with_before:  # a flat body's `before` is null: the nested document's is then
            before, before_unfit = self._row_of(sid, "before")
            rows.append(F.when(F.col(f"_v{sid}")["before"].isNotNull(), before).alias("before"))
            message = F.coalesce(message, before_unfit)
        source_position = F.struct(
            self._read(sid, "source", "lsn").alias("lsn"), self._read(sid, "source", "ts_ms").alias("ts_ms")
        )
        p = F.struct(
            *rows,
            source_position.alias("source"),
            self._read(sid, "op").alias("op"),
            self._read(sid, "ts_ms").alias("ts_ms"),
        )
        read = F.col(f"_v{sid}").isNotNull()
        if self.flats[sid]:
            read = read | F.col(f"_v{sid}{FLAT}").isNotNull()
        return read, p, message

    def _read(self, sid: int, *path: str) -> Column:
        """A field of envelope `sid`'s document (`path`: a field, or a record's and its field): from
        its flat form where the body was read flat."""
        from pyspark.sql import functions as F

        nested = F.col(f"_v{sid}")
        for name in path:
            nested = nested[name]
        if not self.flats[sid] or path[0] == "before":
            return nested
        flat = F.col(f"_v{sid}{FLAT}")
        return F.when(flat.isNotNull(), flat[avro_columns.FLAT_SEP.join(path)]).otherwise(nested)

    def _row_of(self, sid: int, side: str) -> tuple[Column, Column]:
        """(`side`'s row as a struct of the DDL's columns, the first unfit column's message or null)."""
        from pyspark.sql import functions as F

        fields = avro_columns.row_fields(self.texts[sid])
        ddl = avro_columns.ddl_columns(self.data_ddl)
        values: list[Column] = []
        unfit_at: Branches = []
        for column in self.data_columns:  # the first unfit column names the error
            name = avro_columns.avro_name(column)
            field = fields.get(name)
            conv = avro_columns.conversion(field, ddl[column])
            raw = self._read(sid, side, name) if field is not None else F.lit(None)
            source = avro_columns.spark_type(field) if field is not None else "void"
            value, unfit = convert(raw, conv, ddl[column], source)
            values.append(value.cast(ddl[column]).alias(column))
            unfit_at.append((unfit, F.lit(self._unfit(column, ddl[column], field, conv))))
        return F.struct(*values), cases(unfit_at).cast("string")

    def _unfit(self, column: str, ddl_type: str, field: SourceField | None, conv: Conversion) -> str:
        what = field.describe() if field is not None else "nothing"
        why = conv.reason or f"a value of {what} that {ddl_type} cannot hold exactly"
        return (
            f"a value does not fit its column's type in the materializer's DDL ({self.data_ddl}): "
            f"column {column} ({ddl_type}) got {why}; declare the column string to keep it exactly, "
            "or keep such values out of the source"
        )

    def entity(self) -> Branches:
        """The primary key of a framed key, as a string (null: no such field or the body did not decode)."""
        from pyspark.sql import functions as F

        name = avro_columns.avro_name(self.key_column)
        found = {}
        for sid in self.keys:
            field = avro_columns.row_fields(self.texts[sid]).get(name)
            if field is not None:
                found[sid] = _text(F.col(f"_k{sid}")[name], avro_columns.spark_type(field))
        return [(_is("_kid", sid), text) for sid, text in found.items()]

    def error(self, op: Column, entity: Column) -> Branches:
        """Why a framed record cannot be read, as CASE branches (none holds: it can, or it is not
        framed)."""
        from pyspark.sql import functions as F

        vf, kf = F.col("_vf"), F.col("_kf")
        vid, kid = event_shape.schema_id("value").cast("string"), event_shape.schema_id("key").cast("string")
        envelopes, keys = self.envelopes, self.keys
        return [
            (vf & ~_among("_vid", [*envelopes, *keys]),
             _say("value is not a Debezium change event this job can read: its schema id ", vid, NOT_KNOWN)),
            (vf & _among("_vid", keys),
             _say("value's writer schema id ", vid, " is not a Debezium change event envelope")),
            (vf & op.isNull(),
             _say("Avro value does not decode with writer schema id ", vid, " (not a Debezium change event)")),
            (kf & ~_among("_kid", keys),
             _say("key schema id ", kid, NOT_KNOWN + ", or is not a record key's")),
            (kf & entity.isNull(),
             _say("Avro key does not decode with writer schema id ", kid, f" or has no field {self.key_column}")),
        ]  # fmt: skip

    def schema_id(self) -> Column:
        """The id the job learns (`WriterSchemas.learn`): a value or key id the decode was not built
        with, the value's first; null when both are known or not framed (a JSON record)."""
        from pyspark.sql import functions as F

        known = list(self.texts)
        return F.when(F.col("_vf") & ~_among("_vid", known), event_shape.schema_id("value")).when(
            F.col("_kf") & ~_among("_kid", known), event_shape.schema_id("key")
        )


def convert(raw: Column, conv: Conversion, ddl_type: str, source: str) -> tuple[Column, Column]:
    """(the value as `ddl_type`, whether it does not fit) for one conversion of a `source`-typed raw
    value (see avro_columns)."""
    from pyspark.sql import functions as F

    kind = conv.kind
    if kind == "absent":
        return F.lit(None).cast(ddl_type), F.lit(False)
    if kind == "refuse":
        return F.lit(None).cast(ddl_type), raw.isNotNull()
    if kind == "same":
        return raw, F.lit(False)
    if kind == "text":
        return _text(raw, source), F.lit(False)
    if kind == "micros":
        value = F.timestamp_micros(raw)
    elif kind == "millis":
        value = F.when(F.abs(raw) <= _MAX_MILLIS, F.timestamp_millis(raw))
    elif kind == "nanos":  # exact only when the nanos are whole microseconds
        value = F.when(raw % 1000 == 0, F.timestamp_micros(F.floor(raw / 1000).cast("long")))
    elif kind == "days":
        value = F.date_from_unix_date(raw)
    else:
        value = raw.try_cast(ddl_type)
    return value, raw.isNotNull() & (value.isNull() | _inexact(raw, value, conv, ddl_type, source))


def _text(raw: Column, source: str) -> Column:
    """A value as the JSON path's `string` column holds it: bytes as base64, structures as JSON."""
    from pyspark.sql import functions as F

    if source == "binary":
        return F.base64(raw)
    if source in ("array", "map", "record"):
        return F.to_json(raw)
    return raw.cast("string")


def _inexact(raw: Column, value: Column, conv: Conversion, ddl_type: str, source: str) -> Column:
    """Whether a conversion that gave a value lost something on the way."""
    from pyspark.sql import functions as F

    if conv.kind == "decimal_text":  # numeric as string: digits past the scale must all be zeros
        fraction = F.regexp_extract(raw, r"^[+-]?\d*\.(\d*)$", 1)
        digits = F.length(F.regexp_replace(fraction, "0+$", ""))
        return raw.rlike("[eE]") | (digits > avro_columns.decimal_scale(ddl_type))
    if conv.kind != "cast":
        return F.lit(False)
    if source == "array":  # an element that did not convert is a null the source did not have
        return F.size(F.array_compact(raw)) != F.size(F.array_compact(value))
    if source == "string" and ddl_type.startswith(_INTEGRAL):  # "1.5" must not become 1
        return value.cast("string") != F.trim(raw)
    if source.startswith(_NUMERIC) and ddl_type.startswith(_NUMERIC):  # range, scale, precision
        return value != raw
    return F.lit(False)


def _is(id_column: str, sid: int) -> Column:
    from pyspark.sql import functions as F

    return F.col(id_column) == event_shape.schema_id_literal(sid)


def cases(branches: Branches) -> Column:
    """CASE WHEN condition THEN value ... END (null without a branch). One flat CASE: nested in each
    other's ELSE, Spark's code generation renders an inner branch's code again at every level above
    it (a whole-stage code length check per expression), and the stream plans and generates its
    decode in every batch: flat, a live batch's optimizer and code generation have less to do."""
    from pyspark.sql import functions as F

    if not branches:
        return F.lit(None)
    out = F.when(*branches[0])
    for condition, value in branches[1:]:
        out = out.when(condition, value)
    return out


def _among(id_column: str, ids: list[int]) -> Column:
    from pyspark.sql import functions as F

    return F.col(id_column).isin(*[event_shape.schema_id_literal(i) for i in ids]) if ids else F.lit(False)


def _say(before: str, value: Column, after: str) -> Column:
    from pyspark.sql import functions as F

    return F.concat(F.lit(before), value, F.lit(after))
