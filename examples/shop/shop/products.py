"""Example CDC materializer: Postgres `public.products` -> Redis cache, search index, Delta current+history.

Row mapping is the Debezium decoder's: every column of the row is a cache field and a Delta column;
`name` and `description` are searchable.
"""

from __future__ import annotations

from materializers import DebeziumDecoder, Materializer

DATA_DDL = "name string, description string, price string, stock int"
TABLE_DDL = "id integer primary key, name text not null, description text, price numeric(12,2) not null, stock integer not null default 0"
COLUMNS = ("name", "description", "price", "stock")


def decoder() -> DebeziumDecoder:
    return DebeziumDecoder(data_columns=COLUMNS, data_ddl=DATA_DDL, key_column="id")


PRODUCTS = Materializer(
    name="products",
    kind="cdc",
    default_topic="dbz.public.products",
    default_table="public.products",
    data_ddl=DATA_DDL,
    decoder=decoder,
    sequential=False,
    search_fields=("name", "description"),
)
