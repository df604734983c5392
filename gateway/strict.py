"""The base of every config, policy and fixture model: unknown keys are refused (a typo is an
error, not a silently ignored setting) and a loaded value never changes."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
