"""What a user supplies to the store: a decider over plain typed dataclasses.

A decider is three pure pieces: `initial_state`, `decide(command, state) -> Sequence[event]` (raises a
`DomainError` subclass to refuse) and `evolve(state, event) -> state`. Event, command and state classes are
frozen, slotted, keyword-only dataclasses with a stable type string (`event_type`, `command_type`,
`state_type`) and a `schema_version`; the type string names the Avro schema file `<type>.avsc` in
`schema_dir`. Stored data never refers to a Python import path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from typing import Any, Generic, TypeVar

from eventstore.errors import DomainError, SchemaNotFound

S = TypeVar("S")

TYPE_ATTRS = ("event_type", "command_type", "state_type")


def type_name(cls: type) -> str:
    """The stable type string a record class declares (its schema's name in `schema_dir`)."""
    for attr in TYPE_ATTRS:
        value = getattr(cls, attr, None)
        if isinstance(value, str):
            return value
    raise SchemaNotFound(
        f"{cls.__name__} declares none of {TYPE_ATTRS}; add e.g. `event_type: ClassVar[str] = 'order.created'`"
    )


def schema_version(cls: type) -> int:
    value = getattr(cls, "schema_version", 1)
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Aggregate(Generic[S]):
    """One aggregate type: its decider, its record classes and where their Avro schemas live. What a
    user supplies to `EventStore`: the decider stays pure (no I/O), so the store can replay it on any
    processor and unit tests need no services.

    Parameters:
        name: the aggregate's name, the prefix of its stream ids by convention (`order-42`).
        initial_state: the state of a stream before its first event (`load` of a new stream).
        decide: `decide(command, state) -> events`, pure; raises a `DomainError` subclass to refuse,
            and then nothing is appended (any other exception refuses the command too, as
            `decider_crashed`, rather than blocking its partition). An empty sequence accepts the
            command and appends nothing.
        evolve: `evolve(state, event) -> state`, pure; folds one event into the state. It should
            return the state unchanged for an event type it does not know, so an older processor
            tolerates a newer, additive event.
        stream_id: the stream a command addresses, e.g. `lambda c: f"order-{c.order_id}"`; the stream
            picks the partition, so all of a stream's commands meet one processor.
        state_type: the state's dataclass (snapshots store it with its own schema).
        command_types: the command classes; each declares a stable `command_type` string (never an
            import path: stored data must survive a module move) and a `schema_version`.
        event_types: the event classes, each with a stable `event_type` and a `schema_version`.
        schema_dir: the folder (a `Path` or `importlib.resources.files(...)`) holding one Avro schema
            `<type string>.avsc` per command, event and state type; `EventStore` refuses an aggregate
            with a file missing, before anything is written.
        domain_errors: the `DomainError` subclasses `decide` raises, so clients get them back typed
            (matched by their `code`); default () (clients get a plain `DomainError`).

    Raises:
        SchemaNotFound: a record class declares none of `command_type`, `event_type`, `state_type`.

    Example: docs/examples/aggregate.py (a tally that refuses to pass 10, its schemas written by
    the script):

        >>> def decide(command: Add, state: Tally) -> tuple[Added, ...]:
        ...     if state.total + command.points > 10:
        ...         raise OverLimit(f"{state.total} + {command.points} passes 10")
        ...     return (Added(tally_id=command.tally_id, points=command.points),)
        >>> TALLY = Aggregate(name="tally", initial_state=Tally(), decide=decide,
        ...                   evolve=lambda state, e: replace(state, total=state.total + e.points),
        ...                   stream_id=lambda c: f"tally-{c.tally_id}", state_type=Tally,
        ...                   command_types=(Add,), event_types=(Added,), schema_dir=Path("schemas"),
        ...                   domain_errors=(OverLimit,))
        >>> TALLY.fold(TALLY.initial_state, decide(Add(tally_id="a", points=4), Tally()))
        Tally(total=4)
    """

    name: str
    initial_state: S
    decide: Callable[[Any, S], Sequence[Any]]
    evolve: Callable[[S, Any], S]
    stream_id: Callable[[Any], str]
    state_type: type[S]
    command_types: tuple[type, ...]
    event_types: tuple[type, ...]
    schema_dir: Traversable
    domain_errors: tuple[type[DomainError], ...] = ()
    _by_name: dict[str, type] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {type_name(c): c for c in (*self.command_types, *self.event_types, self.state_type)}
        object.__setattr__(self, "_by_name", by_name)

    def record_class(self, name: str) -> type | None:
        """The class registered under a type string, or None if this aggregate does not know it."""
        return self._by_name.get(name)

    def record_types(self) -> tuple[str, ...]:
        """Every type string it declares (commands, events, state): the schema files it needs."""
        return tuple(self._by_name)

    def schema_text(self, name: str) -> str:
        """The Avro schema of type string `name`, as its `.avsc` file holds it.

        Raises:
            SchemaNotFound: `schema_dir` has no `<name>.avsc`.
        """
        path = self.schema_dir / f"{name}.avsc"
        if not path.is_file():
            raise SchemaNotFound(
                f"no schema file {name}.avsc in {self.schema_dir}; add one for type {name!r}"
            )
        return path.read_text(encoding="utf-8")

    def domain_error(self, code: str) -> type[DomainError]:
        """The `domain_errors` class whose `code` a refusal carries (`DomainError` for an unknown one,
        e.g. from a newer processor), so the client raises what `decide` raised."""
        for cls in self.domain_errors:
            if cls.code == code:
                return cls
        return DomainError

    def fold(self, state: S, events: Sequence[Any]) -> S:
        """`state` with `events` applied in order through `evolve` (what a stream's load does)."""
        for event in events:
            state = self.evolve(state, event)
        return state
