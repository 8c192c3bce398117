from __future__ import annotations

from kafkakit.subjects import every_subject

NAMES = [f"s{i:04d}" for i in range(2500)]


def test_pages_until_a_short_page() -> None:
    """Apicurio: at most `limit` per answer, from `offset`."""
    asked: list[tuple[int, int]] = []

    def apicurio(offset: int, limit: int) -> list[str]:
        asked.append((offset, limit))
        return NAMES[offset : offset + limit]

    assert every_subject(apicurio) == NAMES
    assert asked == [(0, 1000), (1000, 1000), (2000, 1000)]


def test_exactly_full_pages_end_on_an_empty_one() -> None:
    assert every_subject(lambda offset, limit: NAMES[:2000][offset : offset + limit]) == NAMES[:2000]


def test_a_server_ignoring_offset_and_limit_is_asked_once_or_twice() -> None:
    """Confluent: the whole list each time, whether longer than a page or exactly one page."""
    calls: list[int] = []

    def whole(names: list[str]) -> object:
        def page_of(offset: int, limit: int) -> list[str]:
            calls.append(offset)
            return names

        return page_of

    assert every_subject(whole(NAMES)) == NAMES  # type: ignore[arg-type]
    assert calls == [0]
    calls.clear()
    assert every_subject(whole(NAMES[:1000])) == NAMES[:1000]  # type: ignore[arg-type]
    assert calls == [0, 1000]
