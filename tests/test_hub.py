"""Hugging Face model ids through a local stand-in of the Hub: the real huggingface_hub client, real HTTP, on
127.0.0.1 (never the internet). The stand-in answers what `hf_hub_download(repo, "config.json", revision=…)`
and `HfApi.get_safetensors_metadata` ask for (huggingface_hub 2.x, file_download.py / hf_api.py):

- HEAD and GET `/{org}/{name}/resolve/{revision}/{filename}` (the revision URL-quoted) with `X-Repo-Commit`,
  `ETag` and `Content-Length`; GET honours `Range: bytes=a-b` (206), which the safetensors header read uses;
- errors as the Hub signals them: `X-Error-Code: RepoNotFound` (404, or 401 without a token),
  `GatedRepo` (401 without a token, 403 with one that has no access), `RevisionNotFound` and `EntryNotFound`
  (404, with `X-Repo-Commit`);
- `model.safetensors` (a header whose counts the test builds), or `model.safetensors.index.json` and shards.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from estimator import estimate, get_device, load_preset, verdict
from estimator.job.stack import resolve_setup
from estimator.models.hub import (
    HubConfigRefused,
    HubError,
    clear_cache,
    fetch_model,
    format_params,
    is_model_id,
    normalise_model_id,
    parse_model_id,
)
from estimator.report.cli import main

ROOT = Path(__file__).resolve().parents[1]
QWEN_CONFIG = (ROOT / "estimator" / "models" / "presets" / "qwen2.5-0.5b.json").read_bytes()
QWEN = load_preset("qwen2.5-0.5b")
QWEN_COUNT = 494_032_768  # Qwen2.5-0.5B as transformers builds it (tests/test_model.py)
assert QWEN.params_total == QWEN_COUNT
TOKEN = "hf_secretTOKEN0123456789abcdef"
SLOW_S = 3.0  # the slow repo's delay; the tests' client timeout is 1 s
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1, "I8": 1, "F8_E4M3": 1}


def safetensors_header(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """The first bytes of a safetensors file: 8-byte little-endian header length, then the JSON header (the
    tensor data itself is never read by the client)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = math.prod(shape) * DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw


# Qwen2.5-0.5B's 494,032,768 parameters as two tensors: the tied embedding and everything else.
QWEN_WEIGHTS = safetensors_header({"model.embed_tokens.weight": ("BF16", [151936, 896]),
                                   "model.layers.rest": ("BF16", [QWEN_COUNT - 151936 * 896])})


@dataclass
class Revision:
    commit: str
    files: dict[str, bytes]


@dataclass
class Repo:
    revisions: dict[str, Revision]
    gated: bool = False  # readable only with TOKEN
    private: bool = False  # "not found" without TOKEN
    delay: float = 0.0  # seconds before any answer


@dataclass
class FakeHub:
    """The stand-in's state: repos and every request it saw (method, path, Authorization header)."""

    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)
    endpoint: str = ""

    def add(self, repo_id: str, files: dict[str, bytes], *, revisions: dict[str, dict[str, bytes]] | None = None,
            **kwargs) -> None:
        revs = {"main": Revision(_commit(repo_id, "main"), files)}
        for name, rev_files in (revisions or {}).items():
            revs[name] = Revision(_commit(repo_id, name), rev_files)
        self.repos[repo_id] = Repo(revs, **kwargs)


def _commit(repo_id: str, revision: str) -> str:
    import hashlib

    return hashlib.sha1(f"{repo_id}@{revision}".encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub: FakeHub

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self._answer(body=True)

    def _send(self, status: int, headers: dict[str, str], payload: bytes, body: bool) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _error(self, status: int, code: str, message: str, body: bool, commit: str | None = None) -> None:
        headers = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(status, headers, json.dumps({"error": message}).encode(), body)

    def _answer(self, body: bool) -> None:
        auth = self.headers.get("Authorization")
        path = urlsplit(self.path).path
        self.hub.requests.append((self.command, path, auth))
        parts = path.strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            self._error(404, "RepoNotFound", "Not a resolve URL", body)
            return
        repo_id = f"{unquote(parts[0])}/{unquote(parts[1])}"
        revision = unquote(parts[3])
        filename = "/".join(unquote(p) for p in parts[4:])
        repo = self.hub.repos.get(repo_id)
        if repo is not None and repo.delay:
            time.sleep(repo.delay)
        authorised = auth == f"Bearer {TOKEN}"
        if repo is None or (repo.private and not authorised):
            self._error(401 if auth is None else 404, "RepoNotFound", "Repository not found", body)
            return
        if repo.gated and not authorised:
            message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated."
            self._error(401 if auth is None else 403, "GatedRepo", message, body)
            return
        rev = repo.revisions.get(revision) or next(
            (r for r in repo.revisions.values() if r.commit == revision), None)
        if rev is None:
            self._error(404, "RevisionNotFound", "Invalid rev id", body)
            return
        content = rev.files.get(filename)
        if content is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist", body, commit=rev.commit)
            return
        headers = {"X-Repo-Commit": rev.commit, "ETag": f'"{_commit(filename, rev.commit)}"',
                   "Accept-Ranges": "bytes"}
        ranged = self.headers.get("Range")
        if body and ranged and ranged.startswith("bytes="):
            start_s, _, end_s = ranged[len("bytes="):].partition("-")
            start = int(start_s)
            end = min(int(end_s) if end_s else len(content) - 1, len(content) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            self._send(206, headers, content[start:end + 1], body)
            return
        self._send(200, headers, content, body)


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Iterator[FakeHub]:
    """A running stand-in on a free port of 127.0.0.1, with HF_ENDPOINT pointing at it, a fresh cache dir
    (huggingface_hub reads HF_HUB_CACHE at import, so its constant is patched) and no token anywhere."""
    state = FakeHub()
    handler = type("Handler", (_Handler,), {"hub": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    _isolate(tmp_path, monkeypatch, state.endpoint)
    state.add("acme/qwen-small", {"config.json": QWEN_CONFIG, "model.safetensors": QWEN_WEIGHTS})
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        clear_cache()


def _closed_port_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there: connection refused


def _isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    import huggingface_hub.constants as constants

    clear_cache()
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


@pytest.fixture(autouse=True)
def _never_the_internet(tmp_path, monkeypatch):
    """Every test in this file talks to 127.0.0.1 only: without the `hub` fixture HF_ENDPOINT is a closed port,
    and a connection anywhere else fails the test."""
    _isolate(tmp_path, monkeypatch, _closed_port_endpoint())
    connect = socket.socket.connect

    def loopback_only(sock, address):
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a test tried to connect to {host}")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    yield
    clear_cache()


# ---- model ids ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("acme/qwen3-8b-sft", ("acme/qwen3-8b-sft", None)),
    ("  acme/qwen3-8b-sft@v1.0 ", ("acme/qwen3-8b-sft", "v1.0")),
    ("Qwen/Qwen2.5-0.5B@refs/pr/3", ("Qwen/Qwen2.5-0.5B", "refs/pr/3")),
    ("https://huggingface.co/meta-llama/Llama-3.1-8B", ("meta-llama/Llama-3.1-8B", None)),
    ("huggingface.co/acme/m/tree/dev", ("acme/m", "dev")),
    ("https://hf.co/acme/m/blob/main/config.json", ("acme/m", None)),
])
def test_model_ids_parse(text, expected):
    assert parse_model_id(text) == expected
    assert is_model_id(text)
    repo, revision = expected
    assert normalise_model_id(text) == (f"{repo}@{revision}" if revision else repo)


@pytest.mark.parametrize("text", ["llama-3.1-8b", "by-size", "", "acme/", "/x", "a/b/c", "a b/c", "acme/x@",
                                  "acme/x@../etc", "acme/-x", "acme/x--y", "acme/x.git", "ac me/x", None, 42,
                                  "acme/" + "x" * 100])
def test_not_model_ids(text):
    assert not is_model_id(text)
    with pytest.raises(HubError):
        parse_model_id(text)


def test_format_params():
    assert format_params(8_190_735_360) == "8.19 B"
    assert format_params(QWEN_COUNT) == "494 M"


# ---- the fetch ---------------------------------------------------------------------------------------------

def test_good_repo_gives_the_presets_spec_and_the_stored_count(hub):
    spec, info = fetch_model("acme/qwen-small", endpoint=hub.endpoint)
    assert spec.params_total == QWEN_COUNT and spec.family == "qwen2"
    assert spec.name == "acme/qwen-small" and spec.source == "hub"
    assert estimate(spec, resolve_setup("trl")).total_bytes == estimate(QWEN, resolve_setup("trl")).total_bytes
    assert info.repo_id == "acme/qwen-small" and info.revision is None
    assert info.commit == _commit("acme/qwen-small", "main")
    assert info.params_safetensors == QWEN_COUNT and info.dtypes == (("BF16", QWEN_COUNT),)
    assert not info.quantization and not info.from_cache and info.notes == ()
    assert info.label == "acme/qwen-small · 494 M parameters, from the Hub"
    assert info.stored == f"Stored as BF16 · commit {info.commit[:7]}"
    paths = {(method, path) for method, path, _ in hub.requests}
    assert ("GET", "/acme/qwen-small/resolve/main/config.json") in paths
    assert ("GET", f"/acme/qwen-small/resolve/{info.commit}/model.safetensors") in paths


def test_one_fetch_per_model_not_per_call(hub):
    first = fetch_model("acme/qwen-small")  # HF_ENDPOINT, read at call time
    seen = len(hub.requests)
    for _ in range(5):
        assert fetch_model("acme/qwen-small") == first
    assert len(hub.requests) == seen


def test_revision(hub):
    other = json.loads(QWEN_CONFIG) | {"num_hidden_layers": 12}
    hub.add("acme/qwen-small", {"config.json": QWEN_CONFIG, "model.safetensors": QWEN_WEIGHTS},
            revisions={"v1": {"config.json": json.dumps(other).encode()}})
    spec, info = fetch_model("acme/qwen-small@v1")
    assert spec.num_layers == 12 and spec.name == "acme/qwen-small@v1"
    assert info.revision == "v1" and info.commit == _commit("acme/qwen-small", "v1")
    assert info.params_safetensors is None  # that revision has no weights: the count is the config's
    assert info.params == spec.params_total < QWEN_COUNT
    assert any("no safetensors weights" in note for note in info.notes)
    assert ("HEAD", "/acme/qwen-small/resolve/v1/config.json", None) in hub.requests
    main_spec, _ = fetch_model("acme/qwen-small")
    assert main_spec.num_layers == 24
    with pytest.raises(HubError, match="revision 'v9' of 'acme/qwen-small' was not found"):
        fetch_model("acme/qwen-small", revision="v9")


def test_sharded_prequantised_checkpoint_says_so(hub):
    cfg = json.loads(QWEN_CONFIG) | {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    index = {"metadata": {"total_size": 1}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                          "b": "model-00002-of-00002.safetensors"}}
    hub.add("acme/qwen-4bit", {
        "config.json": json.dumps(cfg).encode(),
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": safetensors_header({"a": ("U8", [1000, 896])}),
        "model-00002-of-00002.safetensors": safetensors_header({"b": ("BF16", [151936, 896])}),
    })
    spec, info = fetch_model("acme/qwen-4bit")
    assert info.params_safetensors == 1000 * 896 + 151936 * 896
    assert info.dtypes == (("BF16", 151936 * 896), ("U8", 1000 * 896))
    assert info.quantization == "bitsandbytes 4-bit"
    assert info.params == QWEN_COUNT  # packed storage: the label shows the architecture's count
    assert any("pre-quantised checkpoint (bitsandbytes 4-bit)" in note for note in spec.notes)
    assert "pre-quantised (bitsandbytes 4-bit)" in info.stored


def test_quantised_dtypes_without_a_quantization_config(hub):
    hub.add("acme/fp8", {"config.json": QWEN_CONFIG,
                         "model.safetensors": safetensors_header({"w": ("F8_E4M3", [QWEN_COUNT])})})
    _, info = fetch_model("acme/fp8")
    assert info.quantization == "stored as F8_E4M3"


def test_unknown_model_type_from_the_hub_gets_the_llama_like_estimate(hub):
    llama = json.loads((ROOT / "estimator" / "models" / "presets" / "llama-3.1-8b.json").read_text())
    hub.add("acme/new-arch", {"config.json": json.dumps(llama | {"model_type": "acme_decoder"}).encode()})
    spec, _ = fetch_model("acme/new-arch")
    assert spec.params_total == load_preset("llama-3.1-8b").params_total
    assert any("Llama-like" in note for note in spec.notes)


def test_not_found(hub):
    with pytest.raises(HubError, match=r"'nobody/nothing' was not found on the Hub at 127\.0\.0\.1") as info:
        fetch_model("nobody/nothing")
    assert "HF_TOKEN" in str(info.value)  # it may be private


def test_no_config_json(hub):
    hub.add("acme/weights-only", {"model.safetensors": QWEN_WEIGHTS})
    with pytest.raises(HubError, match="'acme/weights-only' has no config.json"):
        fetch_model("acme/weights-only")


def test_gated_without_a_token_asks_for_one(hub):
    hub.add("acme/gated", {"config.json": QWEN_CONFIG, "model.safetensors": QWEN_WEIGHTS}, gated=True)
    with pytest.raises(HubError) as info:
        fetch_model("acme/gated")
    message = str(info.value)
    assert "access to 'acme/gated' was refused: it is a gated model" in message
    assert "token" in message and "HF_TOKEN" in message


def test_gated_with_a_token_reads_it_and_never_shows_it(hub, monkeypatch):
    hub.add("acme/gated", {"config.json": QWEN_CONFIG, "model.safetensors": QWEN_WEIGHTS}, gated=True)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    spec, info = fetch_model("acme/gated")
    assert spec.params_total == QWEN_COUNT and info.params_safetensors == QWEN_COUNT
    assert all(auth == f"Bearer {TOKEN}" for _, _, auth in hub.requests)
    assert all(TOKEN not in path for _, path, _ in hub.requests)  # the token travels in a header, not the URL
    assert TOKEN not in repr(info) and TOKEN not in repr(spec)


def test_token_never_appears_in_errors(hub, monkeypatch):
    hub.add("acme/gated", {"config.json": QWEN_CONFIG}, gated=True)
    hub.add("acme/private", {"config.json": QWEN_CONFIG}, private=True)
    wrong = "hf_wrongTOKENabcdef0123456789"
    messages = []
    for repo in ("acme/gated", "acme/private", "nobody/nothing"):
        with pytest.raises(HubError) as info:
            fetch_model(repo, token=wrong)
        messages.append(str(info.value))
    monkeypatch.setenv("HF_TOKEN", wrong)
    with pytest.raises(HubError) as info:
        fetch_model("acme/gated", endpoint=_closed_port_endpoint())
    messages.append(str(info.value))
    assert "has not been granted access" in messages[0]
    assert "no access" in messages[1]
    for message in messages:
        assert wrong not in message and "hf_" not in message, message
        assert "\n" not in message


def test_timeout(hub):
    hub.add("acme/slow", {"config.json": QWEN_CONFIG}, delay=SLOW_S)
    start = time.monotonic()
    with pytest.raises(HubError, match=r"did not answer within 1 s for 'acme/slow'"):
        fetch_model("acme/slow", timeout=1.0)
    assert time.monotonic() - start < SLOW_S


def test_no_network():
    start = time.monotonic()
    with pytest.raises(HubError, match=r"could not reach the Hub at 127\.0\.0\.1 to read 'acme/qwen-small'"):
        fetch_model("acme/qwen-small", endpoint=_closed_port_endpoint())
    assert time.monotonic() - start < 5


def test_failures_are_remembered_briefly(hub):
    with pytest.raises(HubError):
        fetch_model("nobody/nothing")
    seen = len(hub.requests)
    with pytest.raises(HubError):
        fetch_model("nobody/nothing")
    assert len(hub.requests) == seen


def test_a_config_read_before_answers_when_the_hub_is_unreachable(hub):
    fetch_model("acme/qwen-small")
    clear_cache()  # a new process: only the disk cache is left
    spec, info = fetch_model("acme/qwen-small", endpoint=_closed_port_endpoint())
    assert spec.params_total == QWEN_COUNT
    assert info.from_cache and info.label.endswith("from the local Hub cache")


@pytest.mark.parametrize(("payload", "phrase"), [
    (b'{"model_type": "qwen2", "hidden_size": ', "not valid JSON"),
    (b"[1, 2, 3]", "JSON object"),
    (b"\xff\xfe binary", "UTF-8"),
    (json.dumps({"model_type": "bert", "hidden_size": 8}).encode(), "not supported"),
])
def test_malformed_config(hub, payload, phrase):
    hub.add("acme/broken", {"config.json": payload})
    with pytest.raises(HubError) as info:
        fetch_model("acme/broken")
    assert str(info.value).startswith("the config.json of 'acme/broken' could not be used: ")
    assert phrase in str(info.value)
    # read but refused: a kind of its own (the CLI and the page try the exact trace on it), kept by the cache
    assert isinstance(info.value, HubConfigRefused)
    with pytest.raises(HubConfigRefused):
        fetch_model("acme/broken")


def test_config_over_the_size_cap_is_not_downloaded(hub):
    huge = json.dumps(json.loads(QWEN_CONFIG) | {"padding": "x" * 1_200_000}).encode()
    hub.add("acme/huge", {"config.json": huge})
    with pytest.raises(HubError, match=r"config.json of 'acme/huge' is 1,20\d,\d{3} bytes, more than the 1 MB"):
        fetch_model("acme/huge")
    assert ("GET", "/acme/huge/resolve/main/config.json") not in {(m, p) for m, p, _ in hub.requests}


def test_offline_mode_uses_the_cache_only(hub, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(HubError, match="HF_HUB_OFFLINE is set and 'acme/qwen-small' is not in the local Hub cache"):
        fetch_model("acme/qwen-small")
    assert hub.requests == []


# ---- the CLI -----------------------------------------------------------------------------------------------

def test_cli_reads_a_hub_model(hub, capsys):
    assert main(["--model", "acme/qwen-small", "--json", "--device", "rtx-4090"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["model"] == "acme/qwen-small" and doc["params_total"] == QWEN_COUNT
    assert doc["hub"]["repo_id"] == "acme/qwen-small" and doc["hub"]["params_safetensors"] == QWEN_COUNT
    assert doc["hub"]["dtypes"] == {"BF16": QWEN_COUNT}
    expected = estimate(QWEN, resolve_setup("trl"))
    assert doc["total_bytes"] == sum(int(round(v)) for v in expected.components_bytes.values())
    assert captured.err == ""  # no progress bars or warnings from huggingface_hub


def test_cli_text_output_names_the_model(hub, capsys):
    assert main(["--model", "acme/qwen-small@main"]) == 0
    assert capsys.readouterr().out.startswith("acme/qwen-small@main · 494 M parameters, from the Hub\n")


@pytest.mark.parametrize(("args", "phrase"), [
    (["--model", "nobody/nothing"], "was not found"),
    (["--model", "acme/gated"], "gated"),
    (["--model", "acme/slow"], "did not answer within 1 s"),
    (["--model", "acme/broken"], "not valid JSON"),
    (["--model", "acme/huge"], "more than the 1 MB"),
    (["--model", "acme/qwen-small@nope"], "revision 'nope'"),
    (["--model", "acme/qwen small"], "not a Hugging Face model id"),
    (["--model", "no-such-preset"], "ORG/NAME"),
])
def test_cli_failures_exit_2_with_one_line(hub, capsys, args, phrase):
    hub.add("acme/gated", {"config.json": QWEN_CONFIG}, gated=True)
    hub.add("acme/slow", {"config.json": QWEN_CONFIG}, delay=SLOW_S)
    hub.add("acme/broken", {"config.json": b"{not json"})
    hub.add("acme/huge", {"config.json": b" " * 1_100_000 + QWEN_CONFIG})
    with pytest.raises(SystemExit) as info:
        main([*args, "--json"])
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("estimator: error: ") and phrase in lines[0], captured.err


def test_cli_unreachable_hub_exits_2_in_a_subprocess(tmp_path):
    """The real command line, with HF_ENDPOINT on a closed port and an empty cache: one line, exit 2."""
    env = {"PATH": "/usr/bin:/bin", "HF_ENDPOINT": _closed_port_endpoint(), "HF_HOME": str(tmp_path),
           "HF_HUB_ETAG_TIMEOUT": "2"}
    result = subprocess.run([sys.executable, "-m", "estimator", "--model", "acme/qwen-small", "--json"], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "estimator: error: could not reach the Hub at 127.0.0.1 to read 'acme/qwen-small' "
        "(no network, or HF_ENDPOINT is wrong)"]


# ---- the app -----------------------------------------------------------------------------------------------

def _app():
    from streamlit.testing.v1 import AppTest

    return AppTest.from_file("../app.py", default_timeout=30)


def _text(elements) -> list[str]:
    import re

    return [re.sub(r"\\(.)", r"\1", str(e.value)) for e in elements]


def _headline(at) -> str:
    return next(str(h.value) for h in at.header if str(h.value).startswith(":"))


def test_app_reads_a_typed_id_and_the_link_carries_it(hub):
    at = _app().run()
    at.sidebar.text_input(key="hub_id").set_value("https://huggingface.co/acme/qwen-small").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="model").value == "acme/qwen-small"
    assert at.query_params.get("model") == "acme/qwen-small"  # the URL reproduces the view
    assert at.sidebar.text_input(key="hub_id").value == "acme/qwen-small"
    captions = _text(at.sidebar.caption)
    assert any("acme/qwen-small · 494 M parameters, from the Hub" in c for c in captions), captions
    est = estimate(QWEN, resolve_setup("trl"))
    assert verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline in _headline(at)
    assert any("acme/qwen-small" in c for c in _text(at.caption))  # the model line above the verdict
    (code,) = [c for c in at.code if c.language != "yaml"]  # the share link (not the config file)
    assert "model=acme%2Fqwen-small" in code.value  # the share link
    seen = len(hub.requests)
    at.sidebar.slider(key="batch").set_value(2).run()  # a rerun does not fetch again
    assert not at.exception and len(hub.requests) == seen


def test_app_link_to_a_hub_model(hub):
    at = _app()
    at.query_params["model"] = "acme/qwen-small"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="model").value == "acme/qwen-small"
    assert at.sidebar.text_input(key="hub_id").value == "acme/qwen-small"
    assert not at.warning  # a valid link: no "not valid" note
    est = estimate(QWEN, resolve_setup("trl"))
    assert verdict(est.total_bytes, get_device("rtx-4090"), est.high_bytes).headline in _headline(at)


def test_app_failing_id_shows_a_note_and_the_default_models_verdict(hub):
    at = _app().run()
    default = _headline(at)
    at.sidebar.text_input(key="hub_id").set_value("nobody/nothing").run()
    assert not at.exception, [e.value for e in at.exception]
    notes = _text(at.warning)
    assert any(n.startswith("The Hub model 'nobody/nothing' could not be used: 'nobody/nothing' was not found")
               and n.endswith("Showing Llama-3.1-8B.") for n in notes), notes
    assert _headline(at) == default
    llama = estimate(load_preset("llama-3.1-8b"), resolve_setup("trl"))
    assert verdict(llama.total_bytes, get_device("rtx-4090"), llama.high_bytes).headline in default


def test_app_gated_model_uses_the_secrets_token(hub):
    hub.add("acme/gated", {"config.json": QWEN_CONFIG, "model.safetensors": QWEN_WEIGHTS}, gated=True)
    at = _app()
    at.query_params["model"] = "acme/gated"
    at.run()
    assert any("gated model" in n for n in _text(at.warning))
    clear_cache()
    at = _app()
    at.secrets["HF_TOKEN"] = TOKEN
    at.query_params["model"] = "acme/gated"
    at.run()
    assert not at.exception and not at.warning
    assert any("acme/gated · 494 M parameters" in c for c in _text(at.sidebar.caption))
    everything = json.dumps([str(e.value) for e in [*at.caption, *at.sidebar.caption, *at.markdown, *at.code]])
    assert TOKEN not in everything


def test_app_invalid_typed_id_says_so_and_keeps_the_model(hub):
    at = _app().run()
    at.sidebar.text_input(key="hub_id").set_value("not an id").run()
    assert not at.exception
    assert at.sidebar.selectbox(key="model").value == "llama-3.1-8b"
    assert any("is not a Hugging Face model id" in c for c in _text(at.sidebar.caption))
    assert hub.requests == []
