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
    """One aggregate type: its decider, its record classes and where their Avro schemas live.

    Parameters:
        name: the aggregate's name, the prefix of its stream ids by convention (`order-42`).
        initial_state: the state of a stream before its first event.
        decide: `decide(command, state) -> events`, pure; raises a `DomainError` subclass to refuse.
        evolve: `evolve(state, event) -> state`, pure; folds one event into the state.
        stream_id: the stream a command addresses, e.g. `lambda c: f"order-{c.order_id}"`.
        state_type: the state's dataclass (snapshots store it with its own schema).
        command_types, event_types: the record classes; each declares a stable `command_type` or
            `event_type` string (never an import path) and a `schema_version`.
        schema_dir: the folder (a `Path` or `importlib.resources.files(...)`) holding one Avro schema
            `<type string>.avsc` per command, event and state type; `EventStore` refuses an aggregate
            with a file missing, before anything is written.
        domain_errors: the `DomainError` subclasses `decide` raises, so clients get them back typed
            (matched by their `code`).

    Example (schemas in `myshop/schemas/`: `cart.create.avsc`, `cart.created.avsc`, `cart.state.avsc`):

        >>> @dataclass(frozen=True, slots=True, kw_only=True)
        ... class CreateCart:
        ...     command_type: ClassVar[str] = "cart.create"
        ...     cart_id: str
        >>> @dataclass(frozen=True, slots=True, kw_only=True)
        ... class CartCreated:
        ...     event_type: ClassVar[str] = "cart.created"
        ...     cart_id: str
        >>> @dataclass(frozen=True, slots=True, kw_only=True)
        ... class Cart:
        ...     state_type: ClassVar[str] = "cart.state"
        ...     exists: bool = False
        >>> def decide(command: CreateCart, state: Cart) -> tuple[CartCreated, ...]:
        ...     if state.exists:
        ...         raise DomainError("cart exists")
        ...     return (CartCreated(cart_id=command.cart_id),)
        >>> CART = Aggregate(name="cart", initial_state=Cart(), decide=decide,
        ...                  evolve=lambda state, event: Cart(exists=True),
        ...                  stream_id=lambda c: f"cart-{c.cart_id}", state_type=Cart,
        ...                  command_types=(CreateCart,), event_types=(CartCreated,),
        ...                  schema_dir=files("myshop") / "schemas")
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
        return tuple(self._by_name)

    def schema_text(self, name: str) -> str:
        path = self.schema_dir / f"{name}.avsc"
        if not path.is_file():
            raise SchemaNotFound(
                f"no schema file {name}.avsc in {self.schema_dir}; add one for type {name!r}"
            )
        return path.read_text(encoding="utf-8")

    def domain_error(self, code: str) -> type[DomainError]:
        for cls in self.domain_errors:
            if cls.code == code:
                return cls
        return DomainError

    def fold(self, state: S, events: Sequence[Any]) -> S:
        for event in events:
            state = self.evolve(state, event)
        return state
