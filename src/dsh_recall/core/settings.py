"""A small validated-settings base: a `Section` declares its settings as annotated class
attributes with defaults (`Field` adds bounds), and validates a table of values against them
(types, ranges, choices, unknown keys) when built from one.

Plain classes instead of pydantic: a CLI call reads its config on every run, and importing
pydantic and building the models cost 0.1-0.3 s of a 2-core machine's time per call. The
settings are flat (a few sections of scalars, string lists and string maps), which this
validates fully. The method names follow pydantic's (`model_validate`, `model_dump`,
`model_copy`, `model_fields`, `model_fields_set`) so callers read the same either way.
"""

from __future__ import annotations

import copy
import json
from types import UnionType
from typing import Any, ClassVar, Literal, Self, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from .errors import ConfigError

_T = TypeVar("_T")

class FieldSpec:
    """A setting's default and constraints (inclusive `ge`/`le`, exclusive `gt`)."""

    __slots__ = ("default", "ge", "le", "gt")

    def __init__(self, default: Any, *, ge: float | None = None, le: float | None = None,
                 gt: float | None = None):
        self.default, self.ge, self.le, self.gt = default, ge, le, gt


def Field(default: _T, *, ge: float | None = None, le: float | None = None,
          gt: float | None = None) -> _T:
    """A setting's default with its bounds: `max_tokens: int = Field(256, ge=8)`. The class
    body holds a `FieldSpec`, which `Section` reads when the class is made; to a type checker
    the attribute is its default's type, as it is on every instance."""
    return cast(_T, FieldSpec(default, ge=ge, le=le, gt=gt))


class FieldInfo:
    """One declared setting: its name, its annotation (the type checked) and its spec."""

    __slots__ = ("name", "annotation", "field")

    def __init__(self, name: str, annotation: Any, field: FieldSpec):
        self.name, self.annotation, self.field = name, annotation, field


def _type_error(loc: str, want: str, value: Any) -> ConfigError:
    return ConfigError(f"invalid config value for '{loc}': should be {want}, not {value!r}")


def _check(loc: str, ann: Any, value: Any) -> Any:
    """`value` as the annotation's type, or ConfigError naming `loc`."""
    origin, args = get_origin(ann), get_args(ann)
    if origin is Union or origin is UnionType:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _check(loc, inner[0], value)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"invalid config value for '{loc}': should be one of "
                              f"{', '.join(map(str, args))}, not {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise _type_error(loc, "a list", value)
        return [_check(f"{loc}[{i}]", args[0], v) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise _type_error(loc, "a table", value)
        return {_check(f"{loc} key", args[0], k): _check(f"{loc}.{k}", args[1], v)
                for k, v in value.items()}
    if ann is bool:
        if not isinstance(value, bool):
            raise _type_error(loc, "true or false", value)
        return value
    if ann is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                return int(value)
            raise _type_error(loc, "an integer", value)
        return value
    if ann is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                return float(value) if isinstance(value, str) else _raise(loc, value)
            except ValueError:
                raise _type_error(loc, "a number", value) from None
        if value != value or value in (float("inf"), float("-inf")):
            raise _type_error(loc, "a finite number", value)
        return float(value)
    if ann is str:
        if not isinstance(value, str):
            raise _type_error(loc, "a string", value)
        return value
    if isinstance(ann, type) and issubclass(ann, Section):
        if isinstance(value, ann):
            return value
        if not isinstance(value, dict):
            raise _type_error(loc, "a table", value)
        return ann._from_dict(value, loc + ".")
    return value


def _raise(loc: str, value: Any) -> Any:
    raise _type_error(loc, "a number", value)


class Section:
    """Settings of one section: attributes with defaults, validated on construction."""

    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    model_fields_set: set[str]  # the settings given a value (the others hold their default)

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        hints = get_type_hints(cls)
        fields: dict[str, FieldInfo] = {}
        for name, ann in hints.items():
            if name.startswith("_") or name == "model_fields_set" or get_origin(ann) is ClassVar:
                continue
            raw = cls.__dict__.get(name)
            f = raw if isinstance(raw, FieldSpec) else FieldSpec(raw)
            fields[name] = FieldInfo(name, ann, f)
        cls.model_fields = fields

    def __init__(self, **values: Any):
        object.__setattr__(self, "model_fields_set", set(values))
        for name, info in self.model_fields.items():
            if name in values:
                v = values[name]
            else:
                d = info.field.default
                v = copy.deepcopy(d) if isinstance(d, (list, dict, Section)) else d
            object.__setattr__(self, name, v)

    @classmethod
    def _from_dict(cls, data: dict[str, Any], prefix: str = "") -> Self:
        out: dict[str, Any] = {}
        for key, value in data.items():
            info = cls.model_fields.get(key)
            if info is None:
                raise ConfigError(f"unknown config key '{prefix}{key}'; valid keys: "
                                  + ", ".join(sorted(cls.model_fields)))
            v = _check(prefix + key, info.annotation, value)
            f = info.field
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                for bound, ok, word in ((f.ge, lambda a, b: a >= b, ">="),
                                        (f.le, lambda a, b: a <= b, "<="),
                                        (f.gt, lambda a, b: a > b, ">")):
                    if bound is not None and not ok(v, bound):
                        raise ConfigError(f"invalid config value for '{prefix}{key}': should be "
                                          f"{word} {bound}, not {v!r}")
            out[key] = v
        return cls(**out)

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> Self:
        return cls._from_dict(data)

    def model_dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.model_fields:
            v = getattr(self, name)
            out[name] = v.model_dump() if isinstance(v, Section) else copy.deepcopy(v)
        return out

    def model_dump_json(self) -> str:
        return json.dumps(self.model_dump(), ensure_ascii=False, separators=(",", ":"))

    def model_copy(self, update: dict[str, Any] | None = None) -> Self:
        new = copy.copy(self)
        object.__setattr__(new, "model_fields_set", set(self.model_fields_set) | set(update or {}))
        for k, v in (update or {}).items():
            object.__setattr__(new, k, v)
        return new

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.model_dump() == other.model_dump()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self.model_fields)})"
