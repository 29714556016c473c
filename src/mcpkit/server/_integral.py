"""Integral JSON floats where a tool parameter wants an integer.

JSON Schema 2020-12 (Validation, section 6.1.1) counts a number with a zero fractional part as an
``integer``, so ``1.0`` is valid against the ``{"type": "integer"}`` a tool publishes for an
``int`` parameter, and JSON clients that only have one number type (JavaScript) may well send it.
msgspec's strict conversion refuses a float for ``int``; its lax mode would also turn strings into
numbers.  So the binder, only after a strict conversion failed, walks the arguments along the
parameters' types and turns integral floats into ints exactly where an integer is wanted (not
where a float or ``Any`` is), then converts again.  Non-integral floats, bools and strings are
left as they are and still refused.
"""

from __future__ import annotations

from typing import Any

from msgspec import inspect as mi

__all__ = ["integral_floats_as_ints", "ints_for_integral_floats"]

_ARRAYS = (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType, mi.TupleType, mi.NamedTupleType)
_OBJECTS = (mi.DictType, mi.StructType, mi.DataclassType, mi.TypedDictType)


def _wants_int(info: mi.Type) -> bool:
    if isinstance(info, mi.IntType):
        return True
    # Literal[1, 2] and enums with int values publish {"enum": [1, 2]}, which 1.0 matches too
    if isinstance(info, mi.LiteralType):
        return any(type(v) is int for v in info.values)
    if isinstance(info, mi.EnumType):
        return any(type(m.value) is int for m in info.cls)
    return False


def _bare(info: mi.Type) -> mi.Type:
    while isinstance(info, mi.Metadata):
        info = info.type
    return info


def _items(values: list[Any], infos: list[mi.Type]) -> list[Any]:
    out: list[Any] | None = None
    for i, (item, info) in enumerate(zip(values, infos, strict=False)):
        new = ints_for_integral_floats(item, info)
        if new is not item:
            if out is None:
                out = list(values)
            out[i] = new
    return values if out is None else out


def _fields(value: dict[str, Any], infos: dict[str, mi.Type]) -> dict[str, Any]:
    out: dict[str, Any] | None = None
    for key, item in value.items():
        info = infos.get(key)
        if info is None:
            continue
        new = ints_for_integral_floats(item, info)
        if new is not item:
            if out is None:
                out = dict(value)
            out[key] = new
    return value if out is None else out


def _union_member(value: Any, members: tuple[mi.Type, ...]) -> mi.Type | None:
    """The member a JSON value would be converted as, when that is unambiguous."""
    bare = [_bare(m) for m in members]
    if type(value) is float:
        if any(isinstance(m, mi.FloatType) for m in bare):
            return None  # float | int keeps 1.0 a float, as the first conversion did
        return next((m for m in bare if _wants_int(m)), None)
    kinds = _OBJECTS if type(value) is dict else _ARRAYS if type(value) is list else ()
    candidates = [m for m in bare if isinstance(m, kinds)]
    if len(candidates) > 1 and type(value) is dict:  # tagged Struct union: pick by the tag
        candidates = [
            m
            for m in candidates
            if isinstance(m, mi.StructType) and m.tag_field is not None and value.get(m.tag_field) == m.tag
        ]
    return candidates[0] if len(candidates) == 1 else None


def ints_for_integral_floats(value: Any, info: mi.Type) -> Any:
    """``value`` with integral floats turned into ints where ``info`` wants an integer.

    Returns ``value`` itself (the same object) when nothing changed; containers are copied only
    along the paths that changed.  Where the value does not have the shape of its type it is left
    alone, for the conversion that follows to refuse with its own message.
    """
    info = _bare(info)
    if isinstance(info, mi.UnionType):
        member = _union_member(value, info.types)
        return value if member is None else ints_for_integral_floats(value, member)
    if type(value) is float:
        return int(value) if value.is_integer() and _wants_int(info) else value
    if type(value) is list:
        if isinstance(info, mi.ListType | mi.SetType | mi.FrozenSetType | mi.VarTupleType):
            return _items(value, [info.item_type] * len(value))
        if isinstance(info, mi.TupleType):
            return _items(value, list(info.item_types))
        if isinstance(info, mi.NamedTupleType):
            return _items(value, [f.type for f in info.fields])
        return value
    if type(value) is dict:
        if isinstance(info, mi.DictType):
            return _fields(value, dict.fromkeys(value, info.value_type))
        if isinstance(info, mi.StructType | mi.DataclassType | mi.TypedDictType):
            return _fields(value, {f.encode_name: f.type for f in info.fields})
    return value


def integral_floats_as_ints(value: Any) -> Any:
    """Decoded JSON ``value`` with every integral float an int (the same object when there is
    none): for validators that know no types to walk (pydantic's strict mode)."""
    if type(value) is float:
        return int(value) if value.is_integer() else value
    if type(value) is list:
        items = [integral_floats_as_ints(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if type(value) is dict:
        pairs = {k: integral_floats_as_ints(v) for k, v in value.items()}
        return pairs if any(pairs[k] is not v for k, v in value.items()) else value
    return value
