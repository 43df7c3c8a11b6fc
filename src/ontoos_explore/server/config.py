"""Server configuration: who may call, as which role. YAML -> ServerConfig -> Authenticator.

    principals:
      alice:    {role: analyst, token_sha256: "<hex sha256 of the token>"}
      reviewer: {role: admin,   token_sha256: "...", reviewer: true}

Tokens are never stored, only their SHA-256; a presented token is hashed and
compared with every entry in constant time (hmac.compare_digest, no early
exit), so neither the comparison nor the position of a match shows in the
timing. Every surface resolves its caller through `Authenticator`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..contract import Contract
from ..errors import ContractError
from ..names import fold

HEX64 = re.compile(r"[0-9a-f]{64}")


class PrincipalConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    role: str
    token_sha256: str = Field(description="hex SHA-256 of the bearer token")
    reviewer: bool = False

    @field_validator("token_sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        v = v.strip().lower()
        if not HEX64.fullmatch(v):
            raise ValueError("token_sha256 must be 64 hex characters (sha256 of the token)")
        return v


class ServerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    principals: dict[str, PrincipalConfig] = {}


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    role: str
    reviewer: bool = False


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_config(path: str | Path, contract: Contract) -> ServerConfig:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        config = ServerConfig.model_validate(data)
    except OSError as e:
        raise ContractError(f"cannot read server config {p}: {e.strerror or e}", hint="check --config or ONTOOS_CONFIG") from None
    except (yaml.YAMLError, ValidationError) as e:
        first = e.errors(include_url=False)[0] if isinstance(e, ValidationError) else None
        where = ".".join(str(x) for x in first["loc"]) + ": " + first["msg"] if first else "not valid YAML"
        raise ContractError(f"{p}: {where}") from None
    for name, pc in config.principals.items():
        if contract.role(pc.role) is None:
            raise ContractError(f"{p}: principals.{name}.role: '{pc.role}' is not a role of the contract",
                                hint=f"roles: {', '.join(sorted(contract.roles))}")
    return config


class Authenticator:
    def __init__(self, config: ServerConfig, contract: Contract) -> None:
        self._entries = [
            (bytes.fromhex(pc.token_sha256), Principal(name, contract.role(pc.role).name, pc.reviewer))
            for name, pc in sorted(config.principals.items())
        ]

    def __len__(self) -> int:
        return len(self._entries)

    def authenticate(self, token: str | None) -> Principal | None:
        if not token:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        found = None
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, digest):
                found = principal
        return found

    def by_name(self, name: str) -> Principal | None:
        return next((p for _, p in self._entries if fold(p.name) == fold(name)), None)
