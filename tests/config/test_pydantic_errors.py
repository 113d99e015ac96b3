"""The one translation of pydantic errors into sentences, on errors pydantic really raises."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from config.pydantic_errors import location, message, sentence


class _Leaf(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["a", "b"]
    size: int

    @field_validator("size")
    @classmethod
    def _positive(cls, size: int) -> int:
        if size < 1:
            raise ValueError(f"size={size} is below 1; use 1 or more")
        return size


class _Root(BaseModel):
    items: list[_Leaf]


def _errors(data: object) -> list[dict]:
    with pytest.raises(ValidationError) as err:
        _Root.model_validate(data)
    return err.value.errors()  # type: ignore[return-value]


def test_a_location_indexes_lists_and_dots_fields():
    (error,) = _errors({"items": [{"kind": "a", "size": 1}, {"kind": "a", "size": 0}]})
    assert location(error) == "items[1].size"
    assert location(error, skip={"size"}) == "items[1]"


def test_a_validators_own_sentence_loses_pydantics_prefix():
    (error,) = _errors({"items": [{"kind": "a", "size": 0}]})
    assert message(error) == "size=0 is below 1; use 1 or more"


def test_the_template_of_the_errors_type_is_filled_else_the_default():
    fixes = {"extra_forbidden": "{loc} is not a known field; remove it", "missing": "{loc} is missing; add it"}
    errors = _errors({"items": [{"kind": "c", "size": 1, "colour": "red"}, {"kind": "a"}]})
    sentences = [sentence(e, fixes=fixes, default="{loc}={value}: {msg}; fix the value") for e in errors]
    assert sentences == [
        "items[0].kind='c': Input should be 'a' or 'b'; fix the value",
        "items[0].colour is not a known field; remove it",
        "items[1].size is missing; add it",
    ]


def test_an_error_of_the_whole_document_is_placed_where_told():
    (error,) = _errors([])
    assert sentence(error, fixes={}, default="{loc}: {msg}", where="suite") == (
        "suite: Input should be a valid dictionary or instance of _Root"
    )
