"""Small shared pieces of the HTTP clients (embedder endpoint, reranker endpoint)."""

from __future__ import annotations

import os


def json_headers(api_key_env: str | None, key: str, error: type[Exception]) -> dict[str, str]:
    """JSON request headers, with `Authorization: Bearer` from the environment variable the
    user named (`key` is the config key naming it, for the error). The key itself never
    sits in a config file: only the name of the variable holding it."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key_env:
        token = os.environ.get(api_key_env)
        if not token:
            raise error(f"{key} names {api_key_env}, which is not set")
        headers["Authorization"] = f"Bearer {token}"
    return headers
