"""The ASGI types every module shares.

They are Starlette's own (`Scope` and `Message` are mutable mappings, not dicts), so an app
or a `send` written here is the type Starlette's routes, requests and middleware expect, and a
scope Starlette hands over (`Request.scope`) is accepted here without a cast.
"""

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Header fields as raw (name, value) byte pairs, as ASGI and the upstream transports carry
# them: repeated fields kept, in order.
RawHeaders = list[tuple[bytes, bytes]]

__all__ = ["ASGIApp", "Message", "RawHeaders", "Receive", "Scope", "Send"]
