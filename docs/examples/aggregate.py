"""Aggregate: a decider of your own (a tally that refuses to pass 10) over frozen dataclasses, its
Avro schemas, and an event store running it. Run against the local stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/aggregate.py
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from _stack import drop, running, unique

from eventstore import Aggregate, DomainError, EventStore, StoreConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class Add:
    command_type: ClassVar[str] = "tally.add"  # names the schema file; never an import path
    tally_id: str
    points: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Added:
    event_type: ClassVar[str] = "tally.added"
    tally_id: str
    points: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    state_type: ClassVar[str] = "tally.state"
    total: int = 0


class OverLimit(DomainError):
    code: ClassVar[str] = "tally.over_limit"  # travels in the reply; the client raises this class


def decide(command: Add, state: Tally) -> tuple[Added, ...]:
    if state.total + command.points > 10:
        raise OverLimit(f"{state.total} + {command.points} passes 10; add fewer points")
    return (Added(tally_id=command.tally_id, points=command.points),)


def evolve(state: Tally, event: Added) -> Tally:
    return replace(state, total=state.total + event.points)


SCHEMAS = {  # type string -> Avro record name and fields: one <type string>.avsc per record type
    "tally.add": ("Add", {"tally_id": "string", "points": "int"}),
    "tally.added": ("Added", {"tally_id": "string", "points": "int"}),
    "tally.state": ("Tally", {"total": "int"}),
}
with tempfile.TemporaryDirectory() as schema_dir:
    for type_name, (name, fields) in SCHEMAS.items():
        avro = [{"name": field, "type": kind} for field, kind in fields.items()]
        record = {"type": "record", "name": name, "namespace": "docs.tally", "fields": avro}
        (Path(schema_dir) / f"{type_name}.avsc").write_text(json.dumps(record))
    TALLY = Aggregate(
        name="tally", initial_state=Tally(), decide=decide, evolve=evolve,
        stream_id=lambda command: f"tally-{command.tally_id}", state_type=Tally,
        command_types=(Add,), event_types=(Added,), schema_dir=Path(schema_dir), domain_errors=(OverLimit,),
    )  # fmt: skip
    print("pure:", TALLY.fold(TALLY.initial_state, decide(Add(tally_id="a", points=4), Tally())))
    config = StoreConfig.from_env().with_overrides(name=unique("docs-tally"), partitions=1)
    try:
        with EventStore(config, TALLY) as store:
            store.init()
            with running(store.processor(instance_id="docs-1")), store.client() as client:
                for points in (4, 5, 3):
                    try:
                        outcome = client.execute(Add(tally_id="a", points=points))
                        print(f"add {points}: version {outcome.last_version}")
                    except OverLimit as exc:
                        print(f"add {points}: refused, {exc.code}")
            print("total:", store.load("tally-a").state.total)
    finally:
        drop(config.name)
