"""Device profiles (``--device-profile``): which of the strict rules (``vkdiff.device.shaders.strict``) a profile takes,
from ``profiles.toml`` (every rule for ``strict``; the liberties a vendor is known to take, with their sources, for a
preset), and the rewritten modules the raw transport loads, cached."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import tomllib
from pathlib import Path
from typing import Mapping

from vkdiff.datamodel import CacheCorruptError, cache_dir, read_entry, record_repair, write_entry
from vkdiff.device.shaders.spirv import SpirvError
from vkdiff.device.shaders.strict import RULES, rewrite

__all__ = ["PROFILES", "Profile", "profile_version", "profiles", "rewritten", "rules_of"]

PROFILES_FILE = Path(__file__).with_name("profiles.toml")


@dataclasses.dataclass(frozen=True)
class Profile:
    """One ``--device-profile``: the rules it takes, where each vendor fact comes from, and the routing and limits
    profiles a vendor preset runs under."""

    name: str
    description: str
    rules: tuple[str, ...]
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    route: str | None = None
    limits: str | None = None


@functools.cache
def profiles() -> dict[str, Profile]:
    """``profiles.toml``, checked: every rule it names is one of ``RULES``."""
    table = tomllib.loads(PROFILES_FILE.read_text())
    found = {}
    for name, entry in table.items():
        rules = entry["rules"]
        sources = rules if isinstance(rules, dict) else {}
        unknown = set(rules) - set(RULES)
        if unknown:
            raise SpirvError(f"{PROFILES_FILE}: profile {name!r} names unknown rules {sorted(unknown)}")
        found[name] = Profile(name, entry["description"], tuple(r for r in RULES if r in rules), sources,
                              entry.get("route"), entry.get("limits"))
    return found


PROFILES: dict[str, tuple[str, ...]] = {"": (), **{name: p.rules for name, p in profiles().items()}}
"""``--device-profile``: the rules each profile's raw transport applies to every module it loads."""


@functools.cache
def _rewriter_digest() -> bytes:
    """What a cached rewrite depends on besides its input: the rules and the editor."""
    from vkdiff.device.shaders import spirv_edit, strict

    return hashlib.sha256(Path(strict.__file__).read_bytes() + Path(spirv_edit.__file__).read_bytes()).digest()


def rules_of(profile: str) -> tuple[str, ...]:
    """The rules of a named profile, or of ``rule+rule...`` (``bisect liberty`` runs such sets), in ``RULES``' order.

    Raises:
        SpirvError: a name that is neither a profile nor a rule.
    """
    if profile in PROFILES:
        return PROFILES[profile]
    named = profile.split("+")
    unknown = [name for name in named if name not in RULES]
    if unknown:
        raise SpirvError(f"device profile {profile!r}: {unknown[0]!r} is neither a profile "
                         f"({', '.join(p for p in PROFILES if p)}) nor a rule ({', '.join(RULES)})")
    return tuple(rule for rule in RULES if rule in named)


def profile_version(profile: str) -> str:
    """What a profile's rewrite depends on (its rules, the rewriter's source); empty for no profile."""
    rules = rules_of(profile)
    return hashlib.sha256(_rewriter_digest() + ",".join(rules).encode()).hexdigest()[:16] if rules else ""


_MEMO: dict[str, bytes] = {}


def rewritten(spv: bytes, profile: str) -> bytes:
    """``spv`` under ``profile``'s rules, from vkdiff's cache where an earlier run rewrote it (entries are checked
    when read; a corrupt one is rewritten again and recorded as a repair)."""
    rules = rules_of(profile)
    if not rules:
        return spv
    key = hashlib.sha256(_rewriter_digest() + ",".join(rules).encode() + spv).hexdigest()
    if key not in _MEMO:
        path = cache_dir() / "strict" / f"{key}.spv"
        try:
            _MEMO[key] = read_entry(path)
        except (FileNotFoundError, CacheCorruptError) as exc:
            if isinstance(exc, CacheCorruptError):
                record_repair(exc)
            _MEMO[key] = rewrite(spv, rules)
            write_entry(path, _MEMO[key])
    return _MEMO[key]
