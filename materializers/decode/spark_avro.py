"""`from_avro` whose options are a literal map, so one decode can be planned from several threads.

pyspark's `from_avro(data, schema, options)` hands its options to Spark as `map(k1, v1, ...)`, a
`CreateMap` expression that builds its value in a builder it keeps. A job's views plan their writes
of one decoded batch at once (the cache in a thread of its own), and each plan that copies the
`from_avro` node evaluates that one shared `CreateMap` again: two at once put their keys into the same
builder, and the batch fails with `DUPLICATED_MAP_KEY` (or `requirement failed`) — seen in CI once
in a full run, reproduced by two threads joining one decoded frame (1 to 10 failures in 80 plans).
A literal map is a value, read and never built, so the race has nothing to share. pyspark has no
Python spelling for one (`lit` of a dict fails), so it is made in the JVM: Spark classic, as the
job's driver is (its `foreachBatch` runs Python over py4j).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from materializers.errors import MaterializerError

if TYPE_CHECKING:
    from pyspark.sql import Column


def from_avro(body: Column, writer_schema: str, reader_schema: str | None = None) -> Column:
    """`body` read with `writer_schema` (resolved to `reader_schema` if given) in PERMISSIVE mode:
    a body that does not decode is a null (or a struct of nulls), never a failed batch."""
    from pyspark.sql import functions as F

    options = {"mode": "PERMISSIVE"}
    if reader_schema is not None:
        options["avroSchema"] = reader_schema
    return F.call_function("from_avro", body, F.lit(writer_schema), literal_map(options))


def literal_map(entries: Mapping[str, str]) -> Column:
    """A `map<string,string>` literal."""
    from pyspark import SparkContext
    from pyspark.sql.column import Column as PyColumn

    jvm = SparkContext._jvm
    if jvm is None:
        raise MaterializerError("a Spark literal needs a running SparkSession: build the session first")
    value = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(dict(entries))
    kind = jvm.org.apache.spark.sql.types.DataType.fromDDL("map<string,string>")
    literal = jvm.org.apache.spark.sql.catalyst.expressions.Literal.create(value, kind)
    return PyColumn(jvm.org.apache.spark.sql.classic.ExpressionUtils.column(literal))
