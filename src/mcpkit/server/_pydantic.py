"""Pydantic types as tool parameters and results: schemas, validation, JSON dumps.

pydantic is optional and never imported here: a pydantic type can only appear in an annotation
if the user already imported pydantic, so it is looked up in ``sys.modules``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any, get_args, get_origin

import msgspec

from ._integral import integral_floats_as_ints

__all__ = [
    "enc_hook",
    "is_field_info",
    "is_model_class",
    "loaded_pydantic",
    "needs_pydantic",
    "pydantic_schema",
    "pydantic_validator",
    "to_json",
]

_PYDANTIC_REF = "#/$defs/{model}"


def loaded_pydantic() -> Any:
    return sys.modules.get("pydantic")


def is_model_class(tp: Any) -> bool:
    pyd = loaded_pydantic()
    return pyd is not None and isinstance(tp, type) and issubclass(tp, pyd.BaseModel)


def needs_pydantic(tp: Any) -> bool:
    """True when pydantic must own ``tp``: it mentions a model, pydantic dataclass, pydantic type
    (EmailStr, validators in Annotated, ...).  Deliberately *not* "whatever msgspec can't handle",
    so results never depend on whether some other module happened to import pydantic."""
    if loaded_pydantic() is None:
        return False
    if get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        pydantic_extra = any(
            type(e).__module__.startswith("pydantic") and not is_field_info(e) for e in extras
        )
        return pydantic_extra or needs_pydantic(base)
    if get_origin(tp) is None and isinstance(tp, type):
        return (
            hasattr(tp, "__pydantic_validator__")
            or hasattr(tp, "__get_pydantic_core_schema__")
            or tp.__module__.startswith("pydantic")
        )
    return any(needs_pydantic(arg) for arg in get_args(tp))


def is_field_info(obj: Any) -> bool:
    fields_mod = sys.modules.get("pydantic.fields")
    return fields_mod is not None and isinstance(obj, fields_mod.FieldInfo)


def pydantic_schema(tp: Any, mode: str) -> dict[str, Any]:
    pyd = loaded_pydantic()
    try:
        if is_model_class(tp):
            schema: dict[str, Any] = tp.model_json_schema(mode=mode, ref_template=_PYDANTIC_REF)
        else:
            schema = pyd.TypeAdapter(tp).json_schema(mode=mode, ref_template=_PYDANTIC_REF)
    except pyd.PydanticUserError as exc:  # not a TypeError subclass in every pydantic version
        raise TypeError(f"Cannot generate a JSON Schema for {tp!r}: {exc}") from exc
    return schema


def enc_hook(obj: Any) -> Any:
    # msgspec knows dataclasses/Structs/TypedDicts natively; pydantic models need their own dump.
    dump = getattr(obj, "model_dump", None)
    if dump is not None and is_model_class(type(obj)):
        return dump(mode="json")
    # As pydantic's JSON mode has them: a path is its text, a generator the list of its items.
    if isinstance(obj, os.PathLike):
        return os.fsdecode(obj)
    if isinstance(obj, Iterator):
        return list(obj)
    raise TypeError(f"Cannot convert {type(obj).__name__!r} to JSON")


def to_json(value: Any) -> Any:
    return msgspec.to_builtins(value, enc_hook=enc_hook, str_keys=True)


def pydantic_validator(name: str, annotation: Any, base: Any) -> Callable[[Any], Any]:
    """pydantic's strict JSON mode, so arguments get the schema the tool publishes: lax mode
    takes ``"2"`` or ``true`` for an integer; strict Python mode refuses the strings JSON has
    for dates, UUIDs and enums. ``1.0`` is an integer to JSON Schema (2020-12 Validation
    6.1.1), not to strict pydantic: after a failure, integral floats are tried as ints."""
    pyd = loaded_pydantic()
    try:
        if is_model_class(base):
            parse: Callable[..., Any] = base.model_validate_json
            python: Callable[[Any], Any] = base.model_validate
        else:
            adapter = pyd.TypeAdapter(annotation)
            parse, python = adapter.validate_json, adapter.validate_python
    except (TypeError, pyd.PydanticUserError) as exc:
        raise TypeError(f"Unsupported type for parameter {name!r}: {annotation!r} ({exc})") from exc

    def validate(value: Any) -> Any:
        try:
            data = msgspec.json.encode(value)
        except (TypeError, UnicodeEncodeError):  # not decoded JSON: a Python caller's objects
            return python(value)
        try:
            return parse(data, strict=True)
        except ValueError:  # pydantic.ValidationError
            fixed = integral_floats_as_ints(value)
            if fixed is value:
                raise
            return parse(msgspec.json.encode(fixed), strict=True)

    return validate
