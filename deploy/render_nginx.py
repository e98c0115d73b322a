"""Render deploy/nginx.conf.template (the tokens serve.sh fills with awk): `--compose` writes
deploy/nginx.compose.conf, the configuration compose.yaml mounts (app1..appN:8501, port 80).

    python deploy/render_nginx.py --compose [--processes 2]
    python deploy/render_nginx.py --listen 8501 --runtime /tmp/x --server 127.0.0.1:8601 --server 127.0.0.1:8602
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "nginx.conf.template"
COMPOSE_CONF = HERE / "nginx.compose.conf"


def render(listen: str, runtime: str, servers: list[str]) -> str:
    lines = []
    for line in TEMPLATE.read_text().splitlines():
        if line == "__UPSTREAM_SERVERS__":
            lines += [f"        server {s} max_fails=1 fail_timeout=5s;" for s in servers]
        else:
            lines.append(line.replace("__LISTEN__", listen).replace("__RUNTIME__", runtime))
    return "\n".join(lines) + "\n"


def compose(processes: int = 2) -> str:
    header = "# GENERATED from nginx.conf.template by `python deploy/render_nginx.py --compose`: do not edit.\n"
    # /var/cache/nginx exists in the official nginx image and is writable by its worker.
    return header + render("80", "/var/cache/nginx", [f"app{i}:8501" for i in range(1, processes + 1)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--compose", action="store_true", help=f"write {COMPOSE_CONF.name}")
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--listen", default="8501")
    p.add_argument("--runtime", default="/tmp/wif-nginx")
    p.add_argument("--server", action="append", default=[])
    args = p.parse_args(argv)
    if args.compose:
        COMPOSE_CONF.write_text(compose(args.processes))
        return 0
    sys.stdout.write(render(args.listen, args.runtime, args.server or ["127.0.0.1:8601"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
