"""dsl/record.py: what the DSL's value classes keep of dataclasses' meaning (issue 43 made them records)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import ClassVar

import pytest

from dagplan.dsl.errors import Diagnostic, Span
from dagplan.dsl.ir import Ref
from dagplan.dsl.record import FrozenError, field, fields, record, replace


@record(frozen=True, slots=True)
class Point:
    kind: ClassVar[str] = "point"
    x: int
    y: int = 0
    tags: tuple = field(default_factory=tuple)
    label: str = field(default="", compare=False, repr=False)


@record
class Box:
    items: list = field(default_factory=list)
    seen: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.seen = len(self.items)


@record(frozen=True, slots=True)
class Point3(Point):
    z: int = 0


def test_a_record_means_what_a_dataclass_means():
    p = Point(1, 2, label="a")
    assert p == Point(1, 2, label="b") and hash(p) == hash(Point(1, 2))  # label is not compared
    assert p != Point(1, 3) and Point(1) != Point3(1)  # another class is never equal
    assert repr(p) == "Point(x=1, y=2, tags=())" and Point.kind == "point"
    assert [f.name for f in fields(Point)] == ["x", "y", "tags", "label"]
    with pytest.raises(FrozenError):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    assert replace(p, y=5) == Point(1, 5) and replace(p, y=5).label == "a"
    assert Point3(1, 2, z=3).z == 3 and [f.name for f in fields(Point3)][-1] == "z"
    box = Box([1, 2])
    assert box.seen == 2 and Box().items == [] and Box().items is not Box().items
    with pytest.raises(TypeError):
        hash(box)  # mutable and compared by value: unhashable, as a dataclass
    with pytest.raises(ValueError):
        replace(box, seen=3)


def test_records_pickle_copy_and_take_dataclasses_functions():
    diag = Diagnostic("error", "schema", "bad", Span("p.yaml", ("steps", 0), 3, 4), "fix it")
    for obj in (Point(1, 2, ("a",)), diag, Ref("state", ("a", 0))):
        assert pickle.loads(pickle.dumps(obj)) == obj and copy.deepcopy(obj) == obj
    assert dataclasses.is_dataclass(diag) and dataclasses.replace(diag, code="x").code == "x"
    assert dataclasses.asdict(Point(1, 2))["x"] == 1
    assert [f.name for f in dataclasses.fields(Point)] == ["x", "y", "tags", "label"]
