"""Hosting: the Dockerfile's command line serves the app (health check and pages), and the image's recipe agrees
with the repository (Python version, requirements, what .dockerignore leaves out). There is no Docker engine
here, so the test runs the image's ENTRYPOINT command directly, on a free local port."""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench.common import free_port, stop_process, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
# The app's own code: what `streamlit run app.py` imports.
APP_SOURCES = ["app.py", "pages", "ui", "estimator"]
# Files the running app reads besides its code (the How page's accuracy figures: validation/'s stored report).
APP_DATA = ["requirements.txt", ".streamlit/config.toml", "estimator/models/presets/index.json",
            "ui/data/accuracy_report.json"]
# Import name → distribution name in requirements.txt, where they differ.
DISTRIBUTIONS = {"yaml": "pyyaml"}


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def instruction(name: str) -> list[str]:
    return [args for word, args in instructions() if word == name]


def entrypoint() -> list[str]:
    (args,) = instruction("ENTRYPOINT")
    return json.loads(args)  # exec form: a JSON array


def requirement_names() -> set[str]:
    names = set()
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[<>=!~\[; ]", line, maxsplit=1)[0].lower())
    return names


def third_party_imports() -> set[str]:
    """Top-level modules the app imports that are neither the standard library nor its own packages."""
    local = {p.stem for p in ROOT.iterdir() if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    found = set()
    files = [p for src in APP_SOURCES for p in ([ROOT / src] if src.endswith(".py") else (ROOT / src).rglob("*.py"))]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.add(top)
    return found


def dockerignored(path: str) -> bool:
    """Docker's rule: the last matching pattern wins; '!' re-includes; a pattern matching a parent folder
    excludes everything under it."""
    patterns = [p.strip() for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and not p.startswith("#")]
    parts = path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        regexes = [pat, pat.replace("**/", "")] if pat.startswith("**/") else [pat]
        if any(fnmatch.fnmatchcase(c, r) for c in candidates for r in regexes):
            ignored = not negate
    return ignored


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------

def test_dockerfile_follows_the_official_streamlit_recipe():
    (base,) = instruction("FROM")
    assert base == "python:3.11-slim"
    assert instruction("EXPOSE") == ["8501"]
    (health,) = instruction("HEALTHCHECK")
    assert health.split() == ["CMD", "curl", "--fail", "http://localhost:8501/_stcore/health"]
    assert any("curl" in args for args in instruction("RUN")), "the health check needs curl in the image"
    assert entrypoint() == ["streamlit", "run", "app.py", "--server.port=8501", "--server.address=0.0.0.0"]


def test_image_python_satisfies_the_project():
    (base,) = instruction("FROM")
    version = tuple(int(x) for x in re.search(r"python:(\d+)\.(\d+)", base).groups())
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", requires).groups())
    assert version >= minimum


def test_image_installs_the_runtime_requirements_before_copying_the_code():
    steps = instructions()
    copy_req = steps.index(("COPY", "requirements.txt ."))
    install = next(i for i, (word, args) in enumerate(steps)
                   if word == "RUN" and "pip install" in args and "-r requirements.txt" in args)
    copy_all = steps.index(("COPY", ". ."))
    assert copy_req < install < copy_all  # dependency layer cached across code changes


def test_image_installs_the_exact_trace_with_cpu_torch():
    steps = instructions()
    copy_req = steps.index(("COPY", "requirements-exact.txt ."))
    install = next(i for i, (word, args) in enumerate(steps)
                   if word == "RUN" and "-r requirements-exact.txt" in args)
    args = steps[install][1]
    assert "download.pytorch.org/whl/cpu" in args and "torch==2.13.0" in args  # never PyPI's CUDA build
    assert copy_req < install < steps.index(("COPY", ". ."))
    pins = [li for li in (ROOT / "requirements-exact.txt").read_text().splitlines() if li and not li.startswith("#")]
    assert all("==" in li for li in pins), pins  # pinned: the traced numbers name these versions


def test_requirements_cover_every_third_party_import_of_the_app():
    needed = {DISTRIBUTIONS.get(m, m).lower() for m in third_party_imports()}
    assert {"streamlit", "plotly", "pandas"} <= needed  # the scan sees the app's real imports
    assert needed <= requirement_names(), f"missing from requirements.txt: {sorted(needed - requirement_names())}"


def test_requirements_streamlit_supports_url_binding():
    line = next(li for li in (ROOT / "requirements.txt").read_text().splitlines() if li.startswith("streamlit"))
    minimum = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", line).groups())
    assert minimum >= (1, 59)  # bind="query-params" (1.55) and persist_state (1.59)


def test_dockerignore_keeps_what_the_app_needs_and_drops_the_rest():
    for path in [*APP_SOURCES, *APP_DATA, "app.py", "pages/compare.py", "ui/inputs.py"]:
        assert not dockerignored(path), f"{path} is excluded from the image but the app needs it"
    # the exact trace: the worker and its tracer (exact/), the rest of the developer tools not
    for path in ["exact/worker.py", "exact/trace.py", "exact/losses.py", "requirements-exact.txt"]:
        assert not dockerignored(path), f"{path} is excluded from the image but the exact trace needs it"
    for path in [".git", ".venv/bin/python", "tests/test_hosting.py", "tests/data/preset_param_counts.json",
                 "tests/e2e/conftest.py", "calibration/cases.py", "calibration/trace.py", "bench/load_test.py",
                 "scripts/test.sh", "calibration/run_matrix.py", "validation/__init__.py",
                 "validation/data/fixtures.json",
                 "ui/__pycache__/inputs.cpython-311.pyc", "screenshots/x.png"]:
        assert dockerignored(path), f"{path} would be copied into the image"


# --------------------------------------------------------------------------------------------
# The command line, running
# --------------------------------------------------------------------------------------------

def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


@pytest.fixture(scope="module")
def served():
    """The image's ENTRYPOINT, run from the repository root as the image's WORKDIR holds it. Later flags win in
    Streamlit's command line, so a free port and the loopback address are appended (as `docker run IMAGE
    --server.port=...` would append them)."""
    port = free_port()
    command = [sys.executable, "-m", *entrypoint(), f"--server.port={port}", "--server.address=127.0.0.1",
               "--server.headless=true", "--browser.gatherUsageStats=false"]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(url, timeout_s=90, proc=proc)
        except RuntimeError:
            log.seek(0)
            pytest.fail(f"{shlex.join(command)} did not come up:\n{log.read().decode(errors='replace')}")
        yield url
    finally:
        stop_process(proc, timeout_s=15)
        log.close()


def test_health_endpoint_answers_ok(served):
    assert get(f"{served}/_stcore/health") == (200, "ok")


@pytest.mark.parametrize("path", ["/", "/compare", "/fits", "/sizes", "/scale", "/how",
                                  "/?model=by-size&size=7&device=laptop-36gb&rule=true"])
def test_app_pages_load(served, path):
    status, body = get(served + path)
    assert status == 200
    assert "<title>" in body and 'id="root"' in body  # Streamlit's app shell; the page renders over the socket


# --------------------------------------------------------------------------------------------
# Several processes behind nginx (compose.yaml, deploy/): docs/hosting.md, "More than one process"
# --------------------------------------------------------------------------------------------
DEPLOY = ROOT / "deploy"


def _render():
    sys.path.insert(0, str(DEPLOY))
    try:
        import render_nginx
    finally:
        sys.path.remove(str(DEPLOY))
    return render_nginx


def test_compose_runs_two_app_containers_from_the_dockerfile_behind_nginx():
    import yaml

    services = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
    apps = [name for name in services if name.startswith("app")]
    assert apps == ["app1", "app2"]
    for name in apps:
        app = services[name]
        assert app["build"] == "." and app["environment"]["WIF_EXACT_CACHE_DIR"] == "/cache/exact"
        assert "exact-cache:/cache/exact" in app["volumes"]
        assert app["healthcheck"]["test"][-1] == "http://localhost:8501/_stcore/health"
    nginx = services["nginx"]
    assert "./deploy/nginx.compose.conf:/etc/nginx/nginx.conf:ro" in nginx["volumes"]
    assert {k: v["condition"] for k, v in nginx["depends_on"].items()} == {a: "service_healthy" for a in apps}
    conf = (DEPLOY / "nginx.compose.conf").read_text()
    assert all(f"server {a}:8501 " in conf for a in apps)


def test_compose_yaml_is_a_valid_compose_file(tmp_path):
    """Compose's own parser accepts compose.yaml (docker-compose config validates without a Docker engine; this
    machine has none to run it on)."""
    import shutil

    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.skip("docker-compose is not installed (Debian: apt-get install -y docker-compose)")
    proc = subprocess.run([tool, "-f", str(ROOT / "compose.yaml"), "config", "--services"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == ["app1", "app2", "cache-init", "nginx"]


def test_compose_nginx_conf_is_the_template_rendered():
    assert (DEPLOY / "nginx.compose.conf").read_text() == _render().compose(2), \
        "run: python deploy/render_nginx.py --compose"


def test_the_proxy_keeps_a_browser_on_one_process_and_passes_websockets():
    text = (DEPLOY / "nginx.conf.template").read_text()
    for directive in ["hash $wif_route consistent;", "proxy_set_header Upgrade $http_upgrade;",
                      "proxy_set_header Connection $connection_upgrade;", "proxy_http_version 1.1;",
                      "proxy_buffering off;", "proxy_read_timeout 3600s;", "add_header X-Upstream $upstream_addr always;",
                      'add_header Set-Cookie $wif_set_cookie always;', "proxy_next_upstream error timeout"]:
        assert directive in text, directive


def _nginx() -> str | None:
    import os
    import shutil

    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found or os.geteuid() != 0 or not shutil.which("apt-get"):
        return found
    subprocess.run(["apt-get", "install", "-y", "nginx"], capture_output=True, timeout=300)
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def test_rendered_configs_pass_nginx_t(tmp_path):
    import shutil

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        pytest.skip("nginx is not installed (Debian: apt-get install -y nginx)")
    conf = tmp_path / "nginx.conf"
    conf.write_text(_render().render(str(free_port()), str(tmp_path), ["127.0.0.1:1", "127.0.0.1:2"]))
    proc = subprocess.run([nginx, "-t", "-c", str(conf), "-p", str(tmp_path), "-g", "daemon off;"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_killing_the_process_behind_a_page_brings_it_back_with_the_same_link(tmp_path):
    """deploy/serve.sh 2 (two processes, nginx, no restarts) from a fresh clone of this checkout (committed files
    only, as docs/hosting.md's recipe starts), a Chromium page through the proxy at a link with parameters; the
    process serving it is killed: the page reconnects (to the other process, a new session) and shows the same
    inputs from its URL, never a blank screen.  Run: .venv/bin/python -m pytest -m slow -k killing"""
    import os
    import signal
    import threading

    if _nginx() is None:
        pytest.skip("nginx is not installed and could not be installed (Debian: apt-get install -y nginx, as root)")
    playwright = pytest.importorskip("playwright.sync_api")
    from bench.common import APP_CONNECTED, APP_IDLE, CHART, SLIDER, launch_kwargs

    listen, base = free_port(), free_port()
    while base + 1 == listen:
        base = free_port()
    env = {**os.environ, "PYTHON": sys.executable, "WIF_LISTEN": str(listen), "WIF_BASE_PORT": str(base),
           "WIF_RUNTIME_DIR": str(tmp_path), "WIF_RESTART": "0"}
    checkout = ROOT
    if (ROOT / ".git").exists():  # a git checkout (or worktree): serve from a clone of what is committed
        checkout = tmp_path / "clone"
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(checkout)], check=True, timeout=120)
    log = (tmp_path / "serve.log").open("w")
    serve = subprocess.Popen(["bash", str(checkout / "deploy" / "serve.sh"), "2"], cwd=checkout, env=env, stdout=log,
                             stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{listen}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if get(f"{url}/nginx-health")[0] == 200:
                    break
            except OSError:
                pass
            assert serve.poll() is None and time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.3)
        link = f"{url}/?batch=5&ckpt=false"

        def browse() -> None:
            # its own thread: the slow suite's other browser tests can leave an asyncio loop in this one,
            # and Playwright's sync API refuses to run inside a loop
            with playwright.sync_playwright() as pw:
                browser = pw.chromium.launch(**launch_kwargs())
                page = browser.new_page()
                page.goto(link)
                chart, batch = CHART.format(key="memory_bar"), SLIDER.format(key="batch")
                page.wait_for_selector(chart, timeout=60_000)
                page.wait_for_selector(APP_IDLE, state="attached", timeout=60_000)
                assert page.locator(batch).input_value() == "5"
                serving = page.request.get(f"{url}/_stcore/health").headers["x-upstream"]  # same cookie, same process
                port = int(serving.rsplit(":", 1)[1])
                os.kill(int((tmp_path / f"streamlit-{port}.pid").read_text()), signal.SIGKILL)
                page.wait_for_selector("[data-testid='stApp']:not([data-test-connection-state='CONNECTED'])",
                                       state="attached", timeout=30_000)
                page.wait_for_selector(APP_CONNECTED, state="attached", timeout=60_000)
                page.wait_for_selector(chart, timeout=60_000)
                page.wait_for_selector(APP_IDLE, state="attached", timeout=60_000)
                now = page.request.get(f"{url}/_stcore/health").headers["x-upstream"]
                assert now != serving  # the other process answered
                assert "batch=5" in page.url and "ckpt=false" in page.url
                assert page.locator(batch).input_value() == "5"
                assert page.locator(".st-key-ckpt [aria-checked='true'], .st-key-ckpt [aria-pressed='true']") \
                    .first.inner_text().strip().lower() == "false"
                assert page.locator(chart).is_visible()
                browser.close()

        errors: list[BaseException] = []

        def run() -> None:
            try:
                browse()
            except BaseException as exc:  # re-raised in the test's thread
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        if errors:
            raise errors[0]
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
        log.close()
