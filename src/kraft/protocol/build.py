"""Build a response in whatever version the client asked for, from one description.

kio has one class per message version, each with only that version's fields. A handler
describes its answer once, as nested dicts and lists with every field it knows (the union
over versions), and `build` makes the version's entity: fields the version lacks are
dropped, fields it has must be given unless they have a default, nested structs and
arrays are built with that version's nested classes.
"""

import dataclasses
from functools import cache
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.static.protocol import Entity

from kraft.protocol.codec import request_class, response_class


class BuildError(TypeError):
    pass


@cache
def _plan(cls: type[Entity]) -> list[tuple[str, Any, bool]]:
    """(field name, nested class or None, required) for each field of `cls`."""
    plan = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        nested = kind.type_ if isinstance(kind, EntityField | EntityTupleField) else None
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, nested, required))
    return plan


def build_entity(cls: type[Entity], data: dict[str, Any]) -> Any:
    values = {}
    for name, nested, required in _plan(cls):
        if name not in data:
            if required:
                raise BuildError(f"{cls.__qualname__} v{cls.__version__} needs {name!r}")
            continue
        value = data[name]
        if nested is not None and value is not None:
            if isinstance(value, list | tuple):
                value = tuple(v if dataclasses.is_dataclass(v) else build_entity(nested, v) for v in value)
            elif isinstance(value, dict):
                value = build_entity(nested, value)
        elif isinstance(value, list):
            value = tuple(value)
        values[name] = value
    return cls(**values)


def build_response(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build_entity(response_class(api_key, version), data)


def build_request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build_entity(request_class(api_key, version), data)
