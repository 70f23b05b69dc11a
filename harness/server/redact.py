"""Secrets stay out of everything recorded: commands, pid files, configs, environments, logs.

A secret is an environment variable whose name looks like one (HF_TOKEN, *_PASSWORD...), the
password part of any URL, and the value of --api-key. Recorded commands refer to them through
the environment instead (`$SGLANG_API_KEY`, `"$HF_TOKEN"`), so an exported script still runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.server.command import ServerCommand

_SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_SECRET_FLAGS = ("--api-key", "--admin-api-key")
# user:password@ in any URL (postgresql://, mysql://, https://...): the password part.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):(?P<pw>[^@/\s]+)@")
REDACTED = "<redacted>"
API_KEY_ENV = "SGLANG_API_KEY"  # how recorded commands refer to --api-key's value


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_url_passwords(text: str) -> str:
    """postgresql://user:pass@host/db -> postgresql://user:<redacted>@host/db."""
    return _URL_PASSWORD.sub(lambda m: f"{m['head']}:{REDACTED}@", text)


def has_url_password(text: str) -> bool:
    return bool(_URL_PASSWORD.search(text))


def redacted_env(env: Mapping[str, str]) -> dict[str, str | None]:
    """Secret values become None: exported scripts reference them from the environment. A value
    holding a URL with a password (DATABASE_URL=postgresql://u:p@h/db) is a secret too."""
    return {k: (None if is_secret_name(k) or has_url_password(v) else v) for k, v in env.items()}


def redacted_argv(argv: tuple[str, ...] | list[str]) -> list[str | None]:
    """The value after --api-key (and similar) becomes None; `--api-key=VALUE` and URL passwords
    inside any argument are masked in place."""
    out: list[str | None] = []
    hide = False
    for part in argv:
        if hide:
            out.append(None)
        elif part.startswith(tuple(f + "=" for f in _SECRET_FLAGS)):
            out.append(part.split("=", 1)[0] + "=" + REDACTED)
        else:
            out.append(redact_url_passwords(part))
        hide = part in _SECRET_FLAGS
    return out


def recorded_argv(argv: tuple[str, ...] | list[str]) -> list[str]:
    """The argv as written to result.json, the pid file and logs: --api-key's value is the
    reference $SGLANG_API_KEY, never the key."""
    return ["$" + API_KEY_ENV if part is None else part for part in redacted_argv(argv)]


def recorded_shell(command: ServerCommand) -> str:
    """command.sh: the command line with every secret read from the environment at run time."""
    assignments = [
        f'{k}="${k}"' if v is None else f"{k}={shlex.quote(v)}"
        for k, v in sorted(redacted_env(command.env).items())
    ]
    parts = [
        f'"${API_KEY_ENV}"' if part is None else shlex.quote(part)
        for part in redacted_argv(command.argv)
    ]
    return " ".join([*assignments, *parts])


def secret_values(command: ServerCommand) -> list[str]:
    """The literal secrets a command carries, for masking text the server prints (SGLang logs its
    server_args, --api-key included): the ones it was built with (`command.secrets`, the API
    key), secret-named variables and URL passwords."""
    found = [*command.secrets, *(v for k, v in command.env.items() if is_secret_name(k))]
    found += [
        m["pw"] for v in (*command.env.values(), *command.argv) for m in _URL_PASSWORD.finditer(v)
    ]
    # Longest first, so a secret that contains another is masked whole.
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return redact_url_passwords(text)
