"""Strict building of typed dataclasses from plain mappings (what a params YAML loads to).

An unknown key, a missing required key or a value of the wrong type raises :class:`ConfigError` naming the dotted
key, so a typo in a YAML never falls back to a default. Its own module, so that the config checks
(:mod:`dgro_lib.config.checks`) and the config (:mod:`dgro_lib.config`) share it without importing each other.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

__all__ = ["ConfigError", "build_dataclass", "coerce"]


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the file and the dotted key."""


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def coerce(value: Any, tp: Any, where: str) -> Any:
    """Check ``value`` against the annotation ``tp``; build nested dataclasses; raise ConfigError naming ``where``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return coerce(value, a, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(f"{where}: expected {_type_name(tp)}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {tp.__name__}, got {type(value).__name__}")
        return build_dataclass(tp, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {type(value).__name__} ({value!r})")
        return [coerce(v, args[0] if args else Any, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(value).__name__}")
        kt, vt = args if args else (Any, Any)
        return {coerce(k, kt, f"{where} key"): coerce(v, vt, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported annotation {tp!r}")


def build_dataclass(cls: type, data: dict, where: str) -> Any:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        prefix = f"{where}." if where else ""
        raise ConfigError(
            f"unknown key {prefix}{unknown[0]!s} (valid keys of {cls.__name__}: {', '.join(sorted(fields))})"
        )
    kwargs = {}
    for name, f in fields.items():
        key = f"{where}.{name}" if where else name
        if name in data:
            kwargs[name] = coerce(data[name], hints[name], key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"missing required key {key}")
    return cls(**kwargs)


