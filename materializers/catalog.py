"""Where materializers come from: installed packages' entry points, or `module:attr`.

The toolkit ships no materializer of its own (the demo's `products` and `orders` come from the
`kafka-toolkit-shop` example distribution, through the same door as yours). `lookup(reference)` resolves:
1. `module:attr` (a colon in the reference): `attr` of the imported module, e.g.
   `mypkg.views:orders_by_customer` — for a materializer of your own that is not installed as a plugin;
2. an entry point of the group `kafka_toolkit.materializers` whose name is the reference: an
   installed package declares `[project.entry-points."kafka_toolkit.materializers"]
   orders_by_customer = "mypkg.views:orders_by_customer"`.
Whatever it resolves to must be a `Materializer`, and the views it names instances of the `View`
protocol (factories are checked when the plan builds them): `BadMaterializer` / `BadView` say what
is wrong and how to fix it, before anything starts.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from materializers.errors import BadMaterializer, UnknownMaterializer
from materializers.materializer import Materializer
from materializers.view import check_names, check_view, is_factory

ENTRY_POINT_GROUP = "kafka_toolkit.materializers"


@dataclass(frozen=True, slots=True)
class Known:
    """A materializer and where it comes from (`entry point <value> (<distribution>)`)."""

    spec: Materializer
    origin: str


def lookup(reference: str) -> Materializer:
    """The materializer `reference` names (see the module docstring), checked."""
    if ":" in reference:
        return checked(load(reference), reference)
    named = {point.value: point for point in entry_points(group=ENTRY_POINT_GROUP, name=reference)}
    if len(named) > 1:
        raise BadMaterializer(
            f"materializer {reference!r} is declared by more than one installed package ("
            + ", ".join(sorted(f"{p.value} in {p.dist.name if p.dist else '?'}" for p in named.values()))
            + "); uninstall one of them, or name the one you mean as module:attr"
        )
    if named:
        return from_entry_point(next(iter(named.values())))
    known = sorted({p.name for p in entry_points(group=ENTRY_POINT_GROUP)})
    raise UnknownMaterializer(
        f"no materializer named {reference!r}; installed: {', '.join(known) or 'none'} (see `materializers "
        f"list`); install the package that declares it (entry point group {ENTRY_POINT_GROUP}), or name "
        "one of your own as module:attr (e.g. mypkg.views:orders_by_customer)"
    )


def load(reference: str) -> object:
    """The object `module:attr` names; BadMaterializer when the module does not import or lacks it."""
    module_name, _, attr = reference.partition(":")
    if not module_name or not attr:
        raise BadMaterializer(
            f"{reference!r} is not module:attr; write e.g. mypkg.views:orders_by_customer "
            "(a module importable here, then the name of a Materializer in it)"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a user's module may fail in any way while importing
        raise BadMaterializer(
            f"cannot import module {module_name!r} of {reference!r} ({type(exc).__name__}: {exc}); "
            f"install its package in this environment or add its directory to PYTHONPATH, and check "
            f"that `python -c 'import {module_name}'` works"
        ) from exc
    found: object = module
    for part in attr.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise BadMaterializer(
                f"module {module_name!r} has no attribute {attr!r} (from {reference!r}); name the "
                "Materializer defined there (module:attr)"
            ) from None
    return found


def checked(found: object, reference: str) -> Materializer:
    """`found` as a Materializer whose view instances implement the protocol, or the error saying why not."""
    if not isinstance(found, Materializer):
        raise BadMaterializer(
            f"{reference!r} is a {type(found).__name__}, not a materializers.materializer.Materializer; point "
            "at a Materializer(...) instance"
        )
    instances = [check_view(v, found.name) for v in found.views if not is_factory(v)]
    check_names(instances, found.name)
    return found


def from_entry_point(point: EntryPoint) -> Materializer:
    try:
        found = point.load()
    except Exception as exc:  # a plugin's module may fail in any way while importing
        raise BadMaterializer(
            f"entry point {point.name!r} ({point.value}) of group {ENTRY_POINT_GROUP} does not load "
            f"({type(exc).__name__}: {exc}); reinstall the package that declares it, or fix its value"
        ) from exc
    spec = checked(found, f"entry point {point.name} = {point.value}")
    if spec.name != point.name:
        raise BadMaterializer(
            f"entry point {point.name!r} ({point.value}) names materializer {spec.name!r}; name the entry "
            "point after the materializer (its job directory and checkpoint carry that name)"
        )
    return spec


def available() -> list[Known]:
    """Every materializer `lookup` finds by name (the installed entry points, loaded);
    BadMaterializer for an entry point that does not load."""
    return [
        Known(
            from_entry_point(point),
            f"entry point {point.value}" + (f" ({point.dist.name})" if point.dist else ""),
        )
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name)
    ]
