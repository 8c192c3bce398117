"""The materializers this toolkit ships, by name."""

from __future__ import annotations

from materializers.errors import UnknownMaterializer
from materializers.orders import ORDERS
from materializers.products import PRODUCTS
from materializers.spec import Materializer

CATALOG: dict[str, Materializer] = {m.name: m for m in (PRODUCTS, ORDERS)}


def lookup(name: str) -> Materializer:
    try:
        return CATALOG[name]
    except KeyError:
        raise UnknownMaterializer(
            f"no materializer named {name!r}; known: {', '.join(sorted(CATALOG))} (see `materializers list`)"
        ) from None
