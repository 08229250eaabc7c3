"""What can go wrong talking to an LLM, in three kinds the callers treat differently.

- `LLMUnavailableError`: the server could not answer now (connection refused, timeout, 5xx, 429).
  Transient: a fallback backend is tried, and the durable job retries later.
- `LLMRequestError`: the server refused the request (4xx: unknown model, bad key, request too
  large). Retrying the same request will not help; the message names the setting to fix.
- `LLMOutputError`: the server answered, but nothing usable could be read from the answer.
- `LLMConfigError`: the settings are incomplete; raised at start-up, naming the setting.
"""

from __future__ import annotations


class LLMError(Exception):
    """Any failure of an LLM backend."""


class LLMConfigError(LLMError):
    """Settings are missing or invalid (the message names the environment variable)."""


class LLMUnavailableError(LLMError):
    """Transient: connection failure, timeout, server error (5xx) or rate limit (429)."""


class LLMRequestError(LLMError):
    """The server rejected the request (4xx other than 429)."""


class LLMOutputError(LLMError):
    """The model's answer holds no usable JSON (the message quotes a snippet of it)."""
