"""The demo's shop in Postgres: customers, products (with a large description column) and inventory,
filled with generated but plausible data. Deterministic for a given seed, so runs are comparable."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import psycopg

from shop.products import TABLE_DDL


def schema_sql(schema: str) -> str:
    """The shop's tables in their own Postgres schema (one per demo run, so runs never collide).
    `products` has exactly the columns the products materializer mirrors."""
    return f"""
create schema if not exists {schema};
create table {schema}.customers (
    id bigint primary key,
    name text not null,
    email text not null unique,
    country text not null
);
create table {schema}.products ({TABLE_DDL});
-- Large descriptions are stored out of line (TOAST). With the default replica identity an update
-- that leaves them alone reaches Debezium without them (an "unavailable" placeholder); FULL makes
-- Postgres log the whole row, so every change event carries the description (Debezium docs, TOAST).
alter table {schema}.products alter column description set storage external;
alter table {schema}.products replica identity full;
create table {schema}.inventory (
    product_id integer primary key references {schema}.products (id) on delete cascade,
    on_hand integer not null check (on_hand >= 0)
);
"""


ADJECTIVES = (
    "ceramic",
    "walnut",
    "linen",
    "copper",
    "recycled",
    "hand-thrown",
    "enamel",
    "cast-iron",
    "bamboo",
    "glass",
)
NOUNS = ("teapot", "kettle", "mug", "carafe", "skillet", "bowl", "tray", "grinder", "tumbler", "lantern")
FIRST = ("Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Leslie", "Margaret", "Ken", "Frances")
LAST = (
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Lamport",
    "Hamilton",
    "Thompson",
    "Allen",
)
COUNTRIES = ("DE", "FR", "NL", "SE", "JP", "BR", "CA", "KE", "IN", "NZ")
PROSE = (
    "Made in a small workshop from materials chosen to last for decades of daily use. ",
    "Each piece is inspected by hand; small variations in colour are part of its character. ",
    "Dishwasher safe, though a rinse in warm water keeps the finish at its best. ",
    "Ships in plastic-free packaging, with a care card and the maker's signature. ",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Product:
    id: int
    name: str
    description: str
    price: Decimal
    stock: int


def products(count: int, seed: int = 7) -> Iterator[Product]:
    rng = random.Random(seed)
    for pid in range(1, count + 1):
        adjective, noun = rng.choice(ADJECTIVES), rng.choice(NOUNS)
        body = "".join(rng.choice(PROSE) for _ in range(40))  # ~3 KB: above the TOAST threshold
        yield Product(
            id=pid,
            name=f"{adjective} {noun}".title(),
            description=f"A {adjective} {noun}. {body}",
            price=Decimal(rng.randrange(250, 25000)) / 100,
            stock=rng.randrange(0, 200),
        )


def customers(count: int, seed: int = 11) -> Iterator[tuple[int, str, str, str]]:
    rng = random.Random(seed)
    for cid in range(1, count + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        yield cid, f"{first} {last}", f"{first}.{last}.{cid}@example.org".lower(), rng.choice(COUNTRIES)


def create(dsn: str, schema: str, n_products: int, n_customers: int) -> None:
    """Create the shop's schema and fill it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(schema_sql(schema).encode())
        with conn.cursor() as cur:
            cur.executemany(
                f"insert into {schema}.customers (id, name, email, country) values (%s, %s, %s, %s)".encode(),
                list(customers(n_customers)),
            )
            rows = [(p.id, p.name, p.description, p.price, p.stock) for p in products(n_products)]
            cur.executemany(
                f"insert into {schema}.products (id, name, description, price, stock) values (%s, %s, %s, %s, %s)".encode(),
                rows,
            )
            cur.executemany(
                f"insert into {schema}.inventory (product_id, on_hand) values (%s, %s)".encode(),
                [(row[0], row[4]) for row in rows],
            )
