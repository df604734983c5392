"""The gateway's ASGI app for another server (granian), to compare servers in bench/.

Run: AIGW_CONFIG=gw.yaml granian --interface asgi --loop uvloop granian_app:app
(in bench/). Only the public app: no admin listener, no reload, and none of the listener's own
limits (`gateway/edge.py` is uvicorn's protocol), so this is for measuring, not for serving.
"""

from __future__ import annotations

import os

from gateway.app import GatewayApp
from gateway.loader import load_config
from gateway.runtime import Runtime

app = GatewayApp(Runtime(load_config(os.environ["AIGW_CONFIG"])))
