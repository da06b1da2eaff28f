"""Value classes for the DSL: what ``@dataclass`` gives them, at an eighth of its import-time cost.

``dagplan check`` starts in a fresh process for every pre-commit run, and the standard library's
``dataclasses`` makes that start slow: importing it costs 5 ms (it imports ``inspect``), and each class
0.4 ms, because it compiles six methods per class (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__``, ``__delattr__``) and re-creates the class for its slots. A record compiles one method,
its ``__init__`` (construction must stay fast: a 10,000-step plan builds 100,000 nodes); equality, hash,
repr, frozenness and pickling are shared methods of :class:`Record` that read the class's field table.
Measured on this machine: 40 six-field frozen classes, 16 ms with ``dataclasses`` and 2.4 ms as records.

The subset the DSL uses, with ``dataclasses``' meaning: ``@record(frozen=True, slots=True)``, fields with
defaults, ``field(default=, default_factory=, compare=, repr=, init=)``, ``__post_init__``, and
:func:`replace` / :func:`fields`. Type checkers read it as a dataclass (``dataclass_transform``).
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, dataclass_transform

T = TypeVar("T")
_NONE: Any = object()  # no default given
NOTHING = _NONE


class FrozenError(AttributeError):
    """An attribute of a frozen record was assigned or deleted."""


class Field:
    __slots__ = ("name", "default", "default_factory", "compare", "repr", "init")

    def __init__(self, default: Any = _NONE, default_factory: Any = _NONE, compare: bool = True,
                 repr: bool = True, init: bool = True) -> None:  # fmt: skip
        self.name = ""
        self.default, self.default_factory = default, default_factory
        self.compare, self.repr, self.init = compare, repr, init

    def __repr__(self) -> str:
        return f"Field({self.name!r})"

    def initial(self) -> Any:
        """The value a field takes when not given (its default, or a new one from its factory), else NOTHING."""
        if self.default_factory is not _NONE:
            return self.default_factory()
        return self.default


def field(
    *,
    default: Any = _NONE,
    default_factory: Callable[[], Any] | Any = _NONE,
    compare: bool = True,
    repr: bool = True,
    init: bool = True,
) -> Any:
    return Field(default, default_factory, compare, repr, init)


def _rebuild(cls: type, values: tuple) -> Any:
    """Unpickling: set every field as ``__init__`` would have, without calling it."""
    obj: Any = object.__new__(cls)
    for f, value in zip(cls.__record_fields__, values):  # type: ignore[attr-defined]
        object.__setattr__(obj, f.name, value)
    return obj


class _DataclassFields:
    """``__dataclass_fields__``, built on first use: ``dataclasses.replace``, ``fields``, ``asdict`` and
    ``is_dataclass`` take records as they take dataclasses (our public types were dataclasses, and users'
    code may say so), while ``check`` never imports ``dataclasses``."""

    def __get__(self, obj: Any, cls: type) -> dict:
        built = cls.__dict__.get("__record_dataclass_fields__")
        if built is None:
            import dataclasses

            built = {}
            for f in cls.__record_fields__:  # type: ignore[attr-defined]
                made: Any = dataclasses.field(
                    default=dataclasses.MISSING if f.default is _NONE else f.default,
                    default_factory=dataclasses.MISSING if f.default_factory is _NONE else f.default_factory,
                    init=f.init, repr=f.repr, compare=f.compare,
                )  # fmt: skip
                made.name, made.type = f.name, Any
                made._field_type = dataclasses._FIELD  # type: ignore[attr-defined]  # the kind fields() keeps
                built[f.name] = made
            type.__setattr__(cls, "__record_dataclass_fields__", built)
        return built


class Record:
    """The methods every record shares, read from the class's field table."""

    __slots__ = ()
    __record_fields__: tuple[Field, ...] = ()
    __record_compared__: tuple[str, ...] = ()
    __record_frozen__ = False

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = self.__record_compared__
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__record_fields__ if f.repr)
        return f"{type(self).__qualname__}({shown})"

    __dataclass_fields__ = _DataclassFields()

    def __replace__(self, **changes: Any) -> Any:  # copy.replace (Python 3.13)
        return replace(self, **changes)

    def __reduce__(self) -> tuple:
        return _rebuild, (type(self), tuple(getattr(self, f.name) for f in self.__record_fields__))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, name) for name in self.__record_compared__))


@dataclass_transform(field_specifiers=(field, Field))
def record(cls: Any = None, /, *, frozen: bool = False, slots: bool = False) -> Any:
    """``@record`` / ``@record(frozen=True, slots=True)``: a dataclass-like value class (see the module)."""
    if cls is None:
        return lambda c: _make(c, frozen, slots)
    return _make(cls, frozen, slots)


def _make(cls: type, frozen: bool, slots: bool) -> type:
    inherited = [f for base in reversed(cls.__mro__[1:]) for f in getattr(base, "__record_fields__", ())]
    own = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).replace("typing.", "").startswith("ClassVar"):
            continue  # a class attribute, as for a dataclass
        value = cls.__dict__.get(name, _NONE)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        own.append(f)
    table = tuple({f.name: f for f in (*inherited, *own)}.values())
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    for f in own:
        namespace.pop(f.name, None)
    if slots:
        namespace["__slots__"] = tuple(f.name for f in own)
    else:  # plain defaults stay class attributes, as a dataclass's do
        namespace.update({f.name: f.default for f in own if f.default is not _NONE})
    namespace["__init__"] = _init(cls.__qualname__, table, frozen, "__post_init__" in cls.__dict__ or any(
        "__post_init__" in vars(b) for b in cls.__mro__[1:]))  # fmt: skip
    namespace["__record_fields__"] = table
    namespace["__record_compared__"] = tuple(f.name for f in table if f.compare)
    namespace["__record_frozen__"] = frozen
    if frozen:
        namespace.update(__setattr__=_frozen_setattr, __delattr__=_frozen_delattr, __hash__=_hash)
    elif "__hash__" not in cls.__dict__:
        namespace["__hash__"] = None  # mutable and compared by value: unhashable, as a dataclass
    bases = cls.__bases__ if issubclass(cls, Record) else (*[b for b in cls.__bases__ if b is not object], Record)
    made = type(cls)(cls.__name__, bases, namespace)
    made.__qualname__ = cls.__qualname__
    return made


def _init(qualname: str, table: tuple[Field, ...], frozen: bool, post_init: bool) -> Callable:
    """The one compiled method: ``__init__`` setting every field, defaults bound as globals."""
    scope: dict[str, Any] = {"_set": object.__setattr__, "_NONE": _NONE}
    params, body = [], []
    setter = "_set(self, {name!r}, {value})" if frozen else "self.{name} = {value}"
    for f in table:
        if f.default_factory is not _NONE:
            scope[f"_f_{f.name}"] = f.default_factory
        if f.default is not _NONE:
            scope[f"_d_{f.name}"] = f.default
        if not f.init:
            if f.default_factory is not _NONE:
                body.append(setter.format(name=f.name, value=f"_f_{f.name}()"))
            elif f.default is not _NONE:
                body.append(setter.format(name=f.name, value=f"_d_{f.name}"))
            continue
        if f.default_factory is not _NONE:
            params.append(f"{f.name}=_NONE")
            body.append(setter.format(name=f.name, value=f"_f_{f.name}() if {f.name} is _NONE else {f.name}"))
        else:
            params.append(f"{f.name}=_d_{f.name}" if f.default is not _NONE else f.name)
            body.append(setter.format(name=f.name, value=f.name))
    if post_init:
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass") + "\n"
    exec(source, scope)  # noqa: S102 - code built here from the class's own field names
    init = scope["__init__"]
    init.__qualname__ = f"{qualname}.__init__"
    return init


def fields(obj: Any) -> tuple[Field, ...]:
    """The fields of a record or record class, in order."""
    return obj.__record_fields__


def is_record(obj: Any) -> bool:
    return hasattr(obj, "__record_fields__") and not isinstance(obj, type)


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of a record with some fields changed (``dataclasses.replace``)."""
    for f in obj.__record_fields__:  # type: ignore[attr-defined]
        if f.init and f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
        elif not f.init and f.name in changes:
            raise ValueError(f"field {f.name!r} is not set by __init__: replace() cannot change it")
    return type(obj)(**changes)
