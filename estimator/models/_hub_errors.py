"""Private to hub.py: a failed Hub request in one line each, never the token."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..i18n import N_, Text, short_number

if TYPE_CHECKING:
    from collections.abc import Iterator


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_network(exc: BaseException) -> bool:
    names = {type(e).__name__ for e in _chain(exc)}
    return bool(names & {"ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout",
                         "TimeoutException", "TimeoutError", "NetworkError", "ReadError", "RemoteProtocolError",
                         "ConnectionError", "OfflineModeIsEnabled"}) or isinstance(exc, (ConnectionError, TimeoutError))


def _explain(exc: BaseException, name: str, repo: str, revision: str | None, endpoint: str, token: str | None,
             timeout: float) -> str:
    """One line saying why the Hub did not give a config.json (a Text: English as a str, translated where shown);
    name: the model id (repo@revision)."""
    from huggingface_hub import errors

    host = urlsplit(endpoint).hostname
    hub = Text(N_("the Hub")) if not host or host in ("huggingface.co", "hf.co") else Text(N_("the Hub at {host}"),
                                                                                         host=host)
    for e in _chain(exc):
        if isinstance(e, errors.GatedRepoError):
            if token:
                return Text(N_("access to '{model}' was refused: it is a gated model and the server's Hugging Face "
                               "token (HF_TOKEN) has not been granted access; accept its terms on the model's Hub page "
                               "with that account"), model=name)
            return Text(N_("access to '{model}' was refused: it is a gated model; the server needs a Hugging Face "
                           "token with access (HF_TOKEN in the environment or the Streamlit secrets)"), model=name)
        if isinstance(e, errors.RevisionNotFoundError):
            return Text(N_("revision '{revision}' of '{repo}' was not found on {hub}"), revision=revision or "main",
                        repo=repo, hub=hub)
        if isinstance(e, errors.DisabledRepoError):
            return Text(N_("'{repo}' is disabled on {hub}"), repo=repo, hub=hub)
        if isinstance(e, errors.RepositoryNotFoundError):
            if token:
                return Text(N_("'{repo}' was not found on {hub}, or the server's token (HF_TOKEN) has no access to "
                               "it"), repo=repo, hub=hub)
            return Text(N_("'{repo}' was not found on {hub}; if it is private, the server needs a Hugging Face token "
                           "with access (HF_TOKEN)"), repo=repo, hub=hub)
        if isinstance(e, getattr(errors, "RemoteEntryNotFoundError", errors.EntryNotFoundError)):
            return Text(N_("'{model}' has no config.json on {hub}; is it a transformers model repository?"),
                        model=name, hub=hub)
        if isinstance(e, errors.OfflineModeIsEnabled):
            return Text(N_("HF_HUB_OFFLINE is set and '{model}' is not in the local Hub cache"), model=name)
        if isinstance(e, errors.FileMetadataError):
            return Text(N_("{hub} did not answer like the Hugging Face Hub (check HF_ENDPOINT)"), hub=hub)
        if isinstance(e, errors.HfHubHTTPError) and e.response is not None:
            status = str(e.response.status_code)
            if status in ("401", "403"):
                return Text(N_("{hub} refused the request for '{model}' (HTTP {status}): check the server's "
                               "HF_TOKEN"), hub=hub, model=name, status=status)
            return Text(N_("{hub} answered HTTP {status} for '{model}'; try again later"), hub=hub, status=status,
                        model=name)
        kind = type(e).__name__
        if "Timeout" in kind or isinstance(e, TimeoutError):
            return Text(N_("{hub} did not answer within {seconds} s for '{model}'; try again later"), hub=hub,
                        seconds=short_number(timeout), model=name)
        if kind in ("ConnectError", "ConnectionError", "NetworkError", "ReadError", "RemoteProtocolError",
                    "ProxyError") or isinstance(
                e, ConnectionError):
            return Text(N_("could not reach {hub} to read '{model}' (no network, or HF_ENDPOINT is wrong)"), hub=hub,
                        model=name)
    return Text(N_("could not read '{model}' from {hub} ({error})"), model=name, hub=hub, error=type(exc).__name__)


def _scrub(text: str, token: str | None) -> str:
    """A message without the token (belt and braces: none of ours quotes it) and on one line. A Text that needs
    neither stays a Text (translated where shown); one that does becomes its scrubbed English."""
    line = " ".join(str(text).split())
    for secret in {token or "", os.environ.get("HF_TOKEN", "")}:
        if len(secret) >= 4:
            line = line.replace(secret, "***")
    return text if isinstance(text, Text) and line == str(text) else line
