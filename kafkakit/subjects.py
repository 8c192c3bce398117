"""Every subject of a Confluent-compatible schema registry, page by page (pure; the caller does I/O)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

# Apicurio's ccompat API answers `GET /subjects` with its first 1,000 subjects unless `offset`/`limit`
# page it (a registry shared by many stores and tests passes 1,000 soon); Confluent's answers with all.
PAGE = 1000


def every_subject(page_of: Callable[[int, int], Sequence[str]], *, page: int = PAGE) -> list[str]:
    """The subjects `page_of(offset, limit)` yields, asked until a page is not full or adds nothing new
    (a server that ignores `offset` and `limit` answers the whole list every time)."""
    found: dict[str, None] = {}
    offset = 0
    while True:
        got = page_of(offset, page)
        before = len(found)
        found.update(dict.fromkeys(str(s) for s in got))
        if len(got) != page or len(found) == before:
            return list(found)
        offset += page
