"""Build a response in whatever version the client asked for, from one description.

kio has one class per message version, each with only that version's fields. A handler
describes its answer once, as nested dicts and lists with every field it knows (the union
over versions), and `build` makes the version's entity: fields the version lacks are
dropped, fields it has must be given unless they have a default, nested structs and
arrays are built with that version's nested classes.

`convert` makes one version's entity from another's (a request or response of the same API
in a different version): each field the target has is taken from the source, nested
entities converted in turn, and a field the source lacks comes from `absent`, Kafka's
value for it (or a function of the source entity, for a field another version carries in
another shape). Values are taken by reference, not copied: a Fetch answer's records may be
a region of a segment file, sent later with sendfile.
"""

import dataclasses
from collections.abc import Callable, Mapping
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


@cache
def field_names(cls: type[Entity]) -> frozenset[str]:
    """The names of every field of `cls` and of its nested entities."""
    names = set()
    for name, nested, _ in _plan(cls):
        names.add(name)
        if nested is not None:
            names |= field_names(nested)
    return frozenset(names)


def build_entity(cls: type[Entity], data: dict[str, Any]) -> Any:
    values = {}
    for name, nested, required in _plan(cls):
        if name not in data:
            if required:
                raise BuildError(f"{cls.__qualname__} v{cls.__version__} needs {name!r}")
            continue
        values[name] = _built(nested, data[name])
    return cls(**values)


def build_response(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build_entity(response_class(api_key, version), data)


def build_request(api_key: int, version: int, data: dict[str, Any]) -> Any:
    return build_entity(request_class(api_key, version), data)


def _built(nested: type[Entity] | None, value: Any) -> Any:
    """A field's value given as a dict (or a list of dicts, for an array), built as `nested`."""
    if nested is None or value is None:
        return tuple(value) if isinstance(value, list) else value
    if isinstance(value, list | tuple):
        return tuple(v if dataclasses.is_dataclass(v) else build_entity(nested, v) for v in value)
    return value if dataclasses.is_dataclass(value) else build_entity(nested, value)


def convert(value: Any, cls: type[Entity], absent: Mapping[str, Any | Callable[[Any], Any]],
            given: Mapping[str, Any] | None = None) -> Any:
    """`value` (an entity of another version) as `cls`: see the module's docstring. A value
    in `absent` that is callable is called with the source entity; nested values it gives
    as dicts are built with `cls`'s nested classes. A field the source lacks that is neither
    in `absent` nor defaulted by `cls` is a BuildError. `given` sets top-level fields
    whatever the source holds (what the converting side knows better), built alike."""
    values = {}
    for name, nested, required in _plan(cls):
        if given is not None and name in given:
            values[name] = _built(nested, given[name])
        elif hasattr(value, name):
            found = getattr(value, name)
            if nested is not None and found is not None:
                if isinstance(found, tuple):
                    found = tuple(convert(v, nested, absent) for v in found)
                else:
                    found = convert(found, nested, absent)
            values[name] = found
        elif name in absent:
            default = absent[name]
            values[name] = _built(nested, default(value) if callable(default) else default)
        elif required:
            raise BuildError(f"{cls.__qualname__} v{cls.__version__} needs {name!r}, which "
                             f"{type(value).__qualname__} v{value.__version__} lacks")
    return cls(**values)
