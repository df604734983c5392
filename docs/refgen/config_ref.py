"""The config file's and a policy file's property references, from the JSON Schemas
`aigw schema` and `aigw schema --policies` print (the pydantic models, surfaces included)."""

from __future__ import annotations

from gateway import cli
from refgen import schema_ref
from refgen.markdown import GENERATED

CONFIG_INTRO = """\
Every property of the gateway's YAML config file, from the models `aigw schema` prints as a
JSON Schema (a copy is committed as `config/aigw.schema.json`: point your editor's YAML
support at it). Paths are dotted; `<name>` stands for a key you choose (an upstream's name, a
collection's) and `[]` for an element of a list. Unknown keys are refused: a typo is an error,
not a silently ignored setting. How the file is read (environment variables, generated
secrets, warnings, reloads): [Configuration files](configuration.md).
"""

POLICY_INTRO = """\
Every property of a policy file (a YAML file in the config's `policies:` folder), from the
models `aigw schema --policies` prints (`config/policy.schema.json`). A rule's `kind` says which
of the rule models below it is; what each kind decides and how rules combine:
[the policy model](../explanation/policy-model.md).
"""


def config_page() -> str:
    return schema_ref.page(cli.config_schema(), "Config file reference",
                           GENERATED + "\n" + CONFIG_INTRO)


def policy_page() -> str:
    return schema_ref.page(cli.policy_schema(), "Policy file reference",
                           GENERATED + "\n" + POLICY_INTRO)
