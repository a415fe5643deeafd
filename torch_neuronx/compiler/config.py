"""Settings of the ``neuron`` torch.compile backend, read from the runtime's
environment-variable table (runtime/include/nrt/config.h) at first use.

Tests and programs may change the attributes of ``settings`` at run time;
``torch.compile(..., options={...})`` overrides them per compiled function.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Optional

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _env_values() -> dict:
    from .. import _C

    return {row["name"]: row["value"] for row in _C._env_table()}


def parse_bool(name: str, value: Optional[str], default: bool) -> bool:
    """The runtime's BOOL grammar; anything else is an error naming the variable."""
    if value is None or not value.strip():
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise RuntimeError(f'{name}="{value}" is not a boolean: use 1/0, true/false, yes/no or on/off')


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_neuronx", "neff")


@dataclasses.dataclass
class Settings:
    cache_dir: str
    cache_enabled: bool
    debug_dir: Optional[str]
    cc_flags: str
    fallback_execution: bool  # run ops the compiler cannot lower eagerly (split the graph)


_settings: Optional[Settings] = None


def settings() -> Settings:
    global _settings
    if _settings is None:
        env = _env_values()
        _settings = Settings(
            cache_dir=os.path.expanduser(env.get("TORCH_NEURONX_NEFF_CACHE_DIR") or default_cache_dir()),
            cache_enabled=not parse_bool("TORCH_NEURONX_DISABLE_NEFF_CACHE",
                                         env.get("TORCH_NEURONX_DISABLE_NEFF_CACHE"), False),
            debug_dir=env.get("TORCH_NEURONX_DEBUG_DIR") or None,
            cc_flags=(env.get("NEURON_CC_FLAGS") or "").strip(),
            fallback_execution=not parse_bool("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
                                              env.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"), True),
        )
    return _settings


# options={...} accepted by torch.compile(backend="neuron"); anything else is an error.
OPTION_DOCS = {
    "flags": "graph compiler flags, as in NEURON_CC_FLAGS (appended to it)",
    "fallback_execution": "True: ops the compiler cannot lower run eagerly (the graph is split)",
    "cache": "False: neither read nor write the artifact cache",
    "cache_dir": "the on-disk cache directory (TORCH_NEURONX_NEFF_CACHE_DIR)",
    "debug_dir": "dump directory (TORCH_NEURONX_DEBUG_DIR)",
}


@dataclasses.dataclass(frozen=True)
class Options:
    flags: str
    fallback_execution: bool
    cache: bool
    cache_dir: str
    debug_dir: Optional[str]


def resolve_options(options: Optional[dict]) -> Options:
    from .. import _C

    s = settings()
    options = dict(options or {})
    unknown = sorted(k for k in options if k not in OPTION_DOCS)
    if unknown:
        known = ", ".join(f"{k!r} ({v})" for k, v in OPTION_DOCS.items())
        raise RuntimeError(f"torch.compile(backend='neuron'): unknown option(s) {', '.join(map(repr, unknown))}; "
                           f"the backend accepts {known}")
    flags = " ".join(x for x in (s.cc_flags, str(options.get("flags", "")).strip()) if x)
    _C._compiler_flags_check(flags)  # an unknown flag is an error now, not at the first call
    return Options(
        flags=flags,
        fallback_execution=bool(options.get("fallback_execution", s.fallback_execution)),
        cache=bool(options.get("cache", s.cache_enabled)),
        cache_dir=os.path.expanduser(str(options.get("cache_dir", s.cache_dir))),
        debug_dir=options.get("debug_dir", s.debug_dir),
    )
