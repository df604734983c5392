"""JSON Schemas that clients send (to register, to describe their inputs), made safe to run.

Nothing such a schema says makes the gateway fetch anything, and nothing it or an input says
runs unbounded work: see `compile` (checks made once, when the schema arrives), `keywords`
(a budgeted validator on RE2) and `running` (the work happens in threads, not on the loop).
"""

from gateway.untrusted_schema.compile import (
    DEFAULT_LIMITS,
    CompiledSchema,
    Limits,
    compile_schema,
    compiled,
)
from gateway.untrusted_schema.graph import SchemaRefused
from gateway.untrusted_schema.keywords import Budget, BudgetExceeded, Unverifiable
from gateway.untrusted_schema.running import Overloaded, off_loop, validate
from gateway.untrusted_schema.shape import shape_problem

__all__ = [
    "DEFAULT_LIMITS", "Budget", "BudgetExceeded", "CompiledSchema", "Limits", "Overloaded",
    "SchemaRefused", "Unverifiable", "compile_schema", "compiled", "off_loop", "shape_problem",
    "validate",
]
