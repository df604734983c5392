"""`aigw demo`: the help-centre backend and the gateway in front of it, in one process."""

from __future__ import annotations

import os

from gateway.cli import load_or_exit
from gateway.demo.backend import create_app
from gateway.observability import configure_logging
from gateway.server import listener, run

_BANNER = """\
aigw demo
  gateway   {public}
  admin     {admin}   (/metrics, /healthz, /readyz)
  backend   {backend}   (the "legacy" help-centre API)

Try (the gateway passes every path it does not serve itself to the backend):
  curl -s '{public}/api/v1/articles/search?q=refund&limit=3'
  curl -s '{public}/api/v1/articles/art-0001'
  curl -s -X POST '{public}/api/v1/tasks/classify' -H 'content-type: application/json' \\
       -d '{{"text": "I was charged twice this month"}}'
  curl -s '{admin}/readyz'

Ctrl-C stops both.
"""


def run_demo(config_path: str, backend_port: int) -> int:
    backend_url = f"http://127.0.0.1:{backend_port}"
    os.environ.setdefault("AIGW_DEMO_BACKEND", backend_url)
    loaded = load_or_exit(config_path)
    settings = loaded.settings
    configure_logging(settings.logging.level)
    backend = listener(create_app(), "127.0.0.1", backend_port)
    print(_BANNER.format(
        public=f"http://{settings.listen.host}:{settings.listen.port}",
        admin=f"http://{settings.admin.host}:{settings.admin.port}",
        backend=os.environ["AIGW_DEMO_BACKEND"],
    ), flush=True)
    run(loaded, companions=[backend])
    return 0
