"""A package's public names, imported on first use (PEP 562), so that `import pkg.sub` stays cheap.

Why: importing any submodule first runs its package's `__init__`. The toolkit's submodules are
imported on their own by start-up-sensitive code (Spark's Python workers import `cdc.values`, every CLI
`kafkakit.errors`), so an `__init__` that imported its public names eagerly would load librdkafka,
httpx, fastavro, psycopg and PyYAML into all of them. With `lazy_exports`, `from eventstore import
EventStore` imports the defining module when the name is first asked for, and caches it in the package.

Usage, in a package's `__init__.py`: light names (the errors, which every submodule imports anyway)
are imported as usual; the others are listed twice, as `TYPE_CHECKING` imports (what type checkers and
editors see) and in the map (what runs). `exported` refuses a map that disagrees with `__all__`:

    from pkg.errors import PkgError
    __all__ = ["PkgError", "Thing"]
    if TYPE_CHECKING:
        from pkg.things import Thing
    __getattr__, __dir__ = lazy_exports(__name__, __all__, {"pkg.things": ("Thing",)})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exported(package: str, names: Sequence[str], modules: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Public name -> defining module for the names of `__all__` that `package` has not bound yet.

    Raises ValueError unless `modules` lists exactly those names, once each: a public name that nothing
    provides, or a lazy one missing from `__all__`, is a mistake of the package's `__init__`.
    """
    bound = vars(sys.modules[package])
    where = {name: module for module, found in modules.items() for name in found}
    listed = [name for found in modules.values() for name in found]
    wanted = [name for name in names if name not in bound]
    if sorted(listed) != sorted(set(wanted)) or len(set(names)) != len(names):
        raise ValueError(
            f"{package}: __all__ and the lazy export map disagree on {sorted(set(listed) ^ set(wanted))} "
            "(or list a name twice); every public name not imported eagerly goes in the map, once"
        )
    return where


def lazy_exports(
    package: str, names: Sequence[str], modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level `__getattr__` and `__dir__` of `package`, exporting `names` from `modules`.

    Call it at the end of the package's `__init__`, after the names it imports eagerly.
    """
    where = exported(package, names, modules)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup finds it without us
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
