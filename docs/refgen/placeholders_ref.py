"""The placeholders each kind of upstream operation fills: every `Placeholders` subclass the
package declares (the kinds), its fields and what each holds (`gateway.operations.placeholder`)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import fields

import gateway
from gateway.operations import Placeholders
from refgen.markdown import GENERATED, code, table, text

REFUSAL = ("gw.yaml: aidre.collections.packages.text_search: unknown placeholder {page}; this "
           "operation fills {fetch}, {limit}, {offset}, {query}, {top_k}, {visibility}")
INTRO = f"""\
`{{name}}` in an operation's path, in a query value or in a body string is filled for each call
([Upstream operations](upstream-operations.md)). Each kind of operation fills the placeholders
of its table below, no others: an operation naming another is refused when the config loads,
naming the ones it fills:

```
{REFUSAL}
```

AIDIP operations (`aidip.agents.<id>.operations[]`) are of no kind here: a `{{field}}` in their
path is that field of the caller's input, and the input is the body (`POST`, `PUT`) or the
query (`GET`; [AIDIP, "Methods"](surfaces/aidip.md#methods)).
"""


def kinds() -> dict[str, type[Placeholders]]:
    """Every kind the package declares, by class name: a Placeholders subclass some module
    defines and no other kind extends. (Read from the modules, not `__subclasses__()`, which
    still lists the class each slotted dataclass replaced.)"""
    declared: set[type[Placeholders]] = set()
    for module in pkgutil.walk_packages(gateway.__path__, "gateway."):
        if module.name.endswith(".__main__"):  # importing it would run the command line
            continue
        for value in vars(importlib.import_module(module.name)).values():
            if isinstance(value, type) and issubclass(value, Placeholders) \
                    and value is not Placeholders and value.__module__ == module.name:
                declared.add(value)
    bases = {base for kind in declared for base in kind.__mro__[1:]}
    ordered = sorted(declared - bases,
                     key=lambda k: (k.__module__, inspect.getsourcelines(k)[1]))
    return {kind.__name__: kind for kind in ordered}


def undocumented() -> list[str]:
    """`Kind.field` of every placeholder without a description, and kinds without a place."""
    missing = [f"{name} (configured)" for name, kind in kinds().items() if not kind.configured]
    return missing + [f"{name}.{f.name}" for name, kind in kinds().items()
                      for f in fields(kind) if not f.metadata.get("doc")]


def page() -> str:
    out = ["# Operation placeholders\n", GENERATED, INTRO]
    for name, kind in kinds().items():
        out.append(f"## `{kind.configured}`\n")
        said = inspect.getdoc(kind) or ""
        out.append(f"Kind `{name}`: {text(said)}\n")
        rows = [(code("{" + f.name + "}"), text(f.metadata.get("doc", ""))) for f in fields(kind)]
        out.append(table(("placeholder", "value"), rows))
    return "\n".join(out)
