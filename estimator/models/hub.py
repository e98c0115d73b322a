"""Hugging Face Hub model ids: `ORG/NAME` or `ORG/NAME@REVISION` → the same ModelSpec as a preset or an upload.

Reads the repo's config.json with `huggingface_hub.hf_hub_download` (which honours HF_ENDPOINT, HF_HUB_CACHE and
HF_TOKEN) and, where the Hub has them, the safetensors headers (`HfApi.get_safetensors_metadata`) for the exact
stored parameter count and dtypes. Pure Python: huggingface_hub is imported lazily, on the first fetch, so presets
and uploads never need it nor the network.

Each (repo, revision, endpoint, token) is fetched once per process (successes are kept; failures for
FAILURE_TTL_S seconds, so a dead link does not refetch on every rerun). Every failure is a `HubError` (a
ValueError) with one readable line; no message, note or export ever contains the token."""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from ..i18n import N_, Text, error_message
from ._hub_errors import _explain, _is_network, _scrub
from .config import parse_config_text

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .spec import ModelSpec


DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT_S = 10.0  # per request; HF_HUB_ETAG_TIMEOUT overrides it
MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few kB (the same cap as an upload)
FAILURE_TTL_S = 30.0  # a failed fetch is answered from memory this long, then tried again
CACHE_SIZE = 256  # models kept per process

# Safetensors dtypes that only a quantised checkpoint stores for its weights (packed ints, 8-bit floats, scales).
QUANTISED_DTYPES = frozenset({"U8", "I8", "U4", "I4", "F4", "F6_E2M3", "F6_E3M2", "F8_E4M3", "F8_E5M2", "F8_E8M0",
                              "I32", "U32"})

_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_RE = re.compile(rf"{_PART}/{_PART}")
_REVISION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}")
_HOSTS = ("huggingface.co/", "www.huggingface.co/", "hf.co/")


class HubError(ValueError):
    """A Hub model could not be read: the message is one line, fit to show a user."""


class HubConfigRefused(HubError):
    """The Hub's config.json was read, but the fast estimator cannot use it (the exact trace may still answer)."""


@dataclass(frozen=True)
class HubModel:
    """What was read from the Hub for one model id."""

    repo_id: str
    revision: str | None  # as asked (None = the default branch)
    commit: str | None  # the commit the Hub resolved (None when read from the local cache)
    params_config: int  # parameters the estimate counts (from config.json)
    params_safetensors: int | None  # parameters stored in the safetensors files, when the Hub has them
    dtypes: tuple[tuple[str, int], ...]  # (safetensors dtype, parameters), most first
    quantization: str  # "" or what the checkpoint is quantised with ("gptq 4-bit", "stored as U8/F8_E4M3")
    from_cache: bool  # read from the local Hub cache because the Hub could not be reached
    notes: tuple[str, ...]

    @property
    def model_id(self) -> str:
        return model_id(self.repo_id, self.revision)

    @property
    def params(self) -> int:
        """The count to show: the stored count unless the checkpoint is packed (quantised) or has none."""
        if self.params_safetensors and not self.quantization:
            return self.params_safetensors
        return self.params_config

    @property
    def label(self) -> str:
        """'acme/qwen3-8b-sft · 8.19 B parameters, from the Hub'."""
        where = "from the local Hub cache" if self.from_cache else "from the Hub"
        return f"{self.model_id} · {format_params(self.params)} parameters, {where}"

    @property
    def stored(self) -> str:
        """'Stored as BF16 · commit 1a2b3c4' (empty when nothing beyond the config was read)."""
        parts = []
        if self.dtypes:
            parts.append("Stored as " + ", ".join(d for d, _ in self.dtypes))
        if self.quantization:
            parts.append(f"pre-quantised ({self.quantization})")
        if self.commit:
            parts.append(f"commit {self.commit[:7]}")
        return " · ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {"repo_id": self.repo_id, "revision": self.revision, "commit": self.commit,
                "params_config": self.params_config, "params_safetensors": self.params_safetensors,
                "dtypes": dict(self.dtypes), "quantization": self.quantization or None,
                "from_cache": self.from_cache}


def format_params(count: int) -> str:
    """8_190_735_360 → '8.19 B'; 494_032_768 → '494 M'."""
    return f"{count / 1e9:.2f} B" if count >= 1e9 else f"{count / 1e6:.0f} M"


# --------------------------------------------------------------------------------------------
# Model ids
# --------------------------------------------------------------------------------------------

def model_id(repo_id: str, revision: str | None) -> str:
    return f"{repo_id}@{revision}" if revision else repo_id


def parse_model_id(text: object) -> tuple[str, str | None]:
    """'org/name', 'org/name@rev' or a pasted Hub address (https://huggingface.co/org/name[/tree/rev]) →
    (repo id, revision or None). Anything else is a HubError."""
    raw = str(text).strip() if isinstance(text, str) else ""
    value = re.sub(r"^https?://", "", raw)
    for host in _HOSTS:
        if value.lower().startswith(host):
            value = value[len(host):].rstrip("/")
            parts = value.split("/")
            if len(parts) >= 4 and parts[2] == "tree":
                value = f"{parts[0]}/{parts[1]}@{'/'.join(parts[3:])}"
            elif len(parts) > 2:
                value = "/".join(parts[:2])
            break
    repo, at, revision = value.partition("@")
    if not _REPO_RE.fullmatch(repo) or "--" in repo or ".." in repo or repo.endswith(".git"):
        shown = raw[:60] + ("…" if len(raw) > 60 else "")
        raise HubError(Text(N_("'{model}' is not a Hugging Face model id: use ORG/NAME or ORG/NAME@REVISION"),
                            model=shown))
    if not at:
        return repo, None
    if not _REVISION_RE.fullmatch(revision) or ".." in revision or "//" in revision or revision.endswith("/"):
        raise HubError(Text(N_("'{revision}' is not a valid revision: use a branch, a tag or a commit hash"),
                            revision=revision[:40]))
    return repo, revision


def is_model_id(text: object) -> bool:
    try:
        parse_model_id(text)
    except HubError:
        return False
    return True


def normalise_model_id(text: object) -> str:
    """The canonical 'org/name[@rev]' of a typed or pasted id (HubError when it is not one)."""
    return model_id(*parse_model_id(text))


# --------------------------------------------------------------------------------------------
# The fetch, cached per process
# --------------------------------------------------------------------------------------------

_Key = tuple[str, "str | None", str, str]
_CACHE: OrderedDict[_Key, tuple[float, tuple[ModelSpec, HubModel] | HubError]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_KEY_LOCKS: dict[_Key, threading.Lock] = {}
_CONFIGURED = False


def clear_cache() -> None:
    """Forget every fetched model (tests; a long-running server never needs it)."""
    with _CACHE_LOCK:
        _CACHE.clear()
        _KEY_LOCKS.clear()


def fetch_model(model: str, *, revision: str | None = None, endpoint: str | None = None, token: str | None = None,
                timeout: float | None = None) -> tuple[ModelSpec, HubModel]:
    """The ModelSpec of a Hub model id and what was read. `endpoint` defaults to HF_ENDPOINT (read now, not at
    import), `token` to HF_TOKEN (then huggingface_hub's stored login), `timeout` (seconds per request) to
    HF_HUB_ETAG_TIMEOUT or 10. Raises HubError with one line."""
    repo, asked = parse_model_id(model)
    if revision is not None:
        repo, asked = parse_model_id(model_id(repo, revision))
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).strip().rstrip("/")
    token = token or os.environ.get("HF_TOKEN") or None
    if timeout is None:
        timeout = _env_seconds("HF_HUB_ETAG_TIMEOUT", DEFAULT_TIMEOUT_S)
    key: _Key = (repo, asked, endpoint, hashlib.sha256(token.encode()).hexdigest()[:16] if token else "")
    with _CACHE_LOCK:
        key_lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with key_lock:  # two sessions asking for the same model at once fetch it once
        cached = _cached(key)
        if cached is None:
            try:
                result: tuple[ModelSpec, HubModel] | HubError = _fetch(repo, asked, endpoint, token, timeout)
            except HubError as exc:
                result = exc
            except Exception as exc:  # never let a library surprise reach the page or the CLI as a traceback
                result = HubError(_scrub(Text(N_("could not read '{model}' from {hub} ({error})"),
                                              model=model_id(repo, asked), hub=Text(N_("the Hub")),
                                              error=type(exc).__name__), token))
            _store(key, result)
            cached = result
    if isinstance(cached, HubError):
        raise type(cached)(error_message(cached))  # the cached failure's kind (HubConfigRefused) travels with it
    return cached


def _cached(key: _Key) -> tuple[ModelSpec, HubModel] | HubError | None:
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is None:
            return None
        stamp, value = entry
        if isinstance(value, HubError) and time.monotonic() - stamp > FAILURE_TTL_S:
            del _CACHE[key]
            return None
        _CACHE.move_to_end(key)
        return value


def _store(key: _Key, value: tuple[ModelSpec, HubModel] | HubError) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = (time.monotonic(), value)
        _CACHE.move_to_end(key)
        while len(_CACHE) > CACHE_SIZE:
            old, _ = _CACHE.popitem(last=False)
            _KEY_LOCKS.pop(old, None)


def _env_seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if 0 < value <= 600 else default


def _hf() -> Any:
    """Import huggingface_hub on first use and keep it quiet: no progress bars or retry warnings on the CLI's
    stderr, no telemetry request from this server."""
    global _CONFIGURED
    import huggingface_hub
    from huggingface_hub import constants
    from huggingface_hub.utils import disable_progress_bars, logging

    if not _CONFIGURED:
        constants.HF_HUB_DISABLE_TELEMETRY = True  # read per request: no agent-registry call to huggingface.co
        disable_progress_bars()
        logging.set_verbosity_error()
        _CONFIGURED = True
    return huggingface_hub


T = TypeVar("T")


def _within(seconds: float, work: Callable[[], T]) -> T:
    """Run `work` with a hard deadline: huggingface_hub retries some failures with longer timeouts of its own
    (a minute), which a page must not wait for. On expiry the work is left to finish in a daemon thread."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="hub-fetch", daemon=True).start()
    if not done.wait(seconds):
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Request(NamedTuple):
    """One fetch: what is asked for, of whom, and how long to wait."""

    repo: str
    revision: str | None
    endpoint: str
    token: str | None
    timeout: float
    name: str  # model_id(repo, revision), for messages


def _config_from_hub(hf: Any, rq: _Request) -> tuple[str, str | None]:
    """Download config.json (refused above MAX_CONFIG_BYTES before it is read): (local path, commit)."""
    url = hf.hf_hub_url(rq.repo, "config.json", revision=rq.revision, endpoint=rq.endpoint)
    meta = hf.get_hf_file_metadata(url, token=rq.token, timeout=rq.timeout, endpoint=rq.endpoint)
    if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
        raise HubError(Text(N_("the config.json of '{model}' is {size} bytes, more than the 1 MB a config.json "
                               "can be"), model=rq.name, size=int(meta.size)))
    path = hf.hf_hub_download(rq.repo, "config.json", revision=rq.revision, endpoint=rq.endpoint, token=rq.token,
                              etag_timeout=rq.timeout)
    return path, meta.commit_hash


def _config_path(hf: Any, rq: _Request, offline: bool) -> tuple[str, str | None, bool]:
    """(path of config.json, commit, read from the local cache): the Hub's copy, or offline / when the Hub cannot
    be reached, the local Hub cache's."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    def from_local_cache() -> str:
        return hf.hf_hub_download(rq.repo, "config.json", revision=rq.revision, local_files_only=True)

    if offline:
        try:
            path = from_local_cache()
        except LocalEntryNotFoundError:
            raise HubError(Text(N_("HF_HUB_OFFLINE is set and '{model}' is not in the local Hub cache"),
                                model=rq.name)) from None
        return path, None, True
    try:
        path, commit = _within(3 * rq.timeout + 1, lambda: _config_from_hub(hf, rq))
    except Exception as exc:
        if not _is_network(exc):
            raise
        try:  # the Hub cannot be reached: a config.json read before still answers
            return from_local_cache(), None, True
        except (LocalEntryNotFoundError, OSError, ValueError):
            raise exc from None
    return path, commit, False


def _read_config(hf: Any, rq: _Request, offline: bool) -> tuple[bytes, str | None, bool]:
    """(config.json's bytes, commit, read from the local cache); every failure a HubError without the token."""
    try:
        path, commit, from_cache = _config_path(hf, rq, offline)
        if os.path.getsize(path) > MAX_CONFIG_BYTES:
            raise HubError(Text(N_("the config.json of '{model}' is larger than 1 MB; a config.json is a few kB"),
                                model=rq.name))
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except HubError as exc:
        raise HubError(_scrub(error_message(exc), rq.token)) from None
    except Exception as exc:
        raise HubError(_scrub(_explain(exc, rq.name, rq.repo, rq.revision, rq.endpoint, rq.token, rq.timeout),
                              rq.token)) from None
    return data, commit, from_cache


def _stored_counts(hf: Any, rq: _Request, commit: str | None, notes: list[Any]) -> dict[str, int]:
    """Parameters per dtype from the safetensors headers ({} with a note when they cannot be read)."""
    try:
        api = hf.HfApi(endpoint=rq.endpoint, token=rq.token)
        kwargs: dict[str, Any] = {"revision": commit or rq.revision}
        if "timeout" in inspect.signature(api.get_safetensors_metadata).parameters:  # newer huggingface_hub only
            kwargs["timeout"] = rq.timeout
        meta = _within(3 * rq.timeout + 1, lambda: api.get_safetensors_metadata(rq.repo, **kwargs))
        return {str(k): int(v) for k, v in meta.parameter_count.items() if int(v) > 0}
    except Exception as exc:
        if type(exc).__name__ == "NotASafetensorsRepoError":
            notes.append(Text(N_("{model}: it has no safetensors weights, so the parameter count comes from its "
                                 "config.json"), model=rq.name))
        else:
            notes.append(Text(N_("{model}: its safetensors headers could not be read, so the parameter count "
                                 "comes from its config.json"), model=rq.name))
        return {}


def _checkpoint_note(name: str, spec: ModelSpec, quantization: str, stored: int | None) -> Text | None:
    """A note when the checkpoint is pre-quantised or stores a parameter count other than the config's."""
    if quantization:
        return Text(N_("{model} is a pre-quantised checkpoint ({quantization}): the estimate counts the "
                       "architecture's {params} parameters as the chosen method loads them (16-bit for full "
                       "and LoRA; choose qlora for a 4-bit base)"), model=name, quantization=quantization,
                    params=spec.params_total)
    if stored and abs(stored - spec.params_total) > 0.005 * spec.params_total:
        return Text(N_("{model}: the checkpoint stores {stored} parameters; the estimate counts {params} from "
                       "its config.json"), model=name, stored=stored, params=spec.params_total)
    return None


def _fetch(repo: str, revision: str | None, endpoint: str, token: str | None,
           timeout: float) -> tuple[ModelSpec, HubModel]:
    """The spec and the Hub's facts of one repository: config.json (or the local cache's), then the safetensors
    headers; every error a HubError without the token."""
    hf = _hf()
    from huggingface_hub import constants

    name = model_id(repo, revision)
    rq = _Request(repo, revision, endpoint, token, timeout, name)
    data, commit, from_cache = _read_config(hf, rq, bool(constants.HF_HUB_OFFLINE))
    try:
        spec = parse_config_text(data, name=name)
    except ValueError as exc:
        raise HubConfigRefused(_scrub(Text(N_("the config.json of '{model}' could not be used: {error}"), model=name,
                                   error=error_message(exc)), token)) from None
    cfg = _json_object(data)

    notes: list[Any] = []
    if from_cache:
        notes.append(Text(N_("{model}: the Hub could not be reached; its config.json was read from the local Hub "
                             "cache"), model=name))
        counts: dict[str, int] = {}
    else:
        counts = _stored_counts(hf, rq, commit, notes)
    dtypes = tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    stored = sum(counts.values()) or None
    quantization = _quantization(cfg, counts)
    note = _checkpoint_note(name, spec, quantization, stored)
    if note is not None:
        notes.append(note)
    notes = [_scrub(n, token) for n in notes]
    info = HubModel(repo_id=repo, revision=revision, commit=commit, params_config=spec.params_total,
                    params_safetensors=stored, dtypes=dtypes, quantization=quantization, from_cache=from_cache,
                    notes=tuple(notes))
    return replace(spec, source="hub", notes=(*spec.notes, *notes)), info


def _json_object(data: bytes) -> dict[str, Any]:
    import json

    try:
        cfg = json.loads(data.decode("utf-8-sig"))
    except ValueError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def _quantization(cfg: dict[str, Any], counts: dict[str, int]) -> str:
    """What a pre-quantised checkpoint is quantised with, or ''."""
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        method = str(qc.get("quant_method") or "quantised")[:30]
        bits = qc.get("bits")
        if qc.get("load_in_4bit"):
            bits = 4
        elif qc.get("load_in_8bit"):
            bits = 8
        return f"{method} {bits}-bit" if isinstance(bits, int) and not isinstance(bits, bool) else method
    total = sum(counts.values())
    packed = sorted(d for d, n in counts.items() if d in QUANTISED_DTYPES and n > 0.01 * total)
    return f"stored as {'/'.join(packed)}" if packed else ""
