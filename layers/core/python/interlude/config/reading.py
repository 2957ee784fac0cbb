"""The one place the package reads its process environment (outside the CLI and the local stack, which read the
operator's shell and write the functions' environment).

A settings group is a class of `setting` fields, each naming the variables that set it; `from_env` reads them all
at once, parses each by its default's type and raises one ConfigError naming every variable it could not use (an
empty variable counts as unset), or else every conflict between the values it read (the group's `conflicts`). Each
group is read once per process through its cached accessor (`cached`): a Lambda instance's environment never
changes, so the entry points read every group at cold start (interlude.config.check) and a bad value stops the
instance there, not a request later. `forget` drops what was read, as a new instance would start (the local stack
once its environment is complete; the tests between tests).

A group is a frozen, keyword-only record like a dataclass, built without one: `@dataclass` generates each class's
methods with exec (about 0.8 ms a group), and every function reads every group at cold start.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

T = TypeVar("T")
_REQUIRED: Any = object()
# What a required field whose value is known only once deployed is judged with (EnvironmentSettings.refusals).
UNKNOWN = "(known once deployed)"
# A switch's words (any case); anything else stops the cold start rather than guessing.
SWITCH_WORDS = {"true": True, "on": True, "1": True, "false": False, "off": False, "0": False}


class ConfigError(RuntimeError):
    """Variables of the environment that are missing or malformed, each named with what was wrong."""


def switch(raw: str) -> bool:
    # bool("off") is True: a switch is read by its words.
    word = raw.strip().lower()
    if word not in SWITCH_WORDS:
        raise ValueError(f"a switch is one of {sorted(SWITCH_WORDS)}")
    return SWITCH_WORDS[word]


def json_object(raw: str) -> dict[str, str]:
    value = json.loads(raw)
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError("not a JSON object of strings")
    return value


def base_url(raw: str) -> str:
    return raw.rstrip("/")


# Why a value its parse refused is wrong (else the parse's own words).
_NOT: dict[Callable[[str], Any], str] = {
    int: "not a whole number",
    float: "not a number",
    json_object: "not a JSON object of strings",
}


class Setting:
    """A field of a settings group: the variables that set it, first one first, and how its value is read."""

    __slots__ = ("at_least", "at_most", "default", "parse", "variables")

    def __init__(
        self,
        variables: tuple[str, ...],
        default: Any,
        parse: Callable[[str], Any] | None,
        at_least: float | None,
        at_most: float | None,
    ) -> None:
        self.variables = variables
        self.default = default
        self.at_least = at_least
        self.at_most = at_most
        # By the default's type unless told: a bool is a switch, a number its kind, anything else the text itself.
        if parse is None:
            parse = switch if isinstance(default, bool) else type(default) if isinstance(default, int | float) else str
        self.parse = parse

    def initial(self) -> Any:
        return dict(self.default) if isinstance(self.default, dict) else self.default

    def read(self, raw: str) -> Any:
        try:
            value: Any = self.parse(raw)
        except ValueError as refused:
            raise ValueError(_NOT.get(self.parse) or str(refused)) from None
        # Refused, not held at the bound: a value the operator chose is never silently changed (docs/adr/0205).
        if self.at_least is not None and value < self.at_least:
            raise ValueError(f"at least {self.at_least:g}, not {value:g}")
        if self.at_most is not None and value > self.at_most:
            raise ValueError(f"at most {self.at_most:g}, not {value:g}")
        return value


def setting(
    variables: str | tuple[str, ...],
    *,
    default: Any = _REQUIRED,
    parse: Callable[[str], Any] | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
) -> Any:
    """A field set by the first of `variables` that is set and not empty, else `default` (without one: required).
    Parsed by `parse` or by the default's type; a number outside [at_least, at_most] is refused."""
    return Setting((variables,) if isinstance(variables, str) else variables, default, parse, at_least, at_most)


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class EnvironmentSettings:
    """Base of every settings group: keyword-only construction, read-only fields, equal when every field is."""

    _settings: ClassVar[dict[str, Setting]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._settings = {name: value for name, value in vars(cls).items() if isinstance(value, Setting)}

    def __init__(self, **values: Any) -> None:
        unknown = sorted(values.keys() - self._settings.keys())
        missing = [name for name, spec in self._settings.items() if spec.default is _REQUIRED and name not in values]
        if unknown or missing:
            raise TypeError(f"{type(self).__name__}: unknown fields {unknown}, missing fields {missing}")
        for name, spec in self._settings.items():
            object.__setattr__(self, name, values[name] if name in values else spec.initial())

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and a field may be a dict

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        values, problems, _ = cls._read(os.environ if environ is None else environ)
        if problems:
            raise ConfigError("; ".join(problems))
        read = cls(**values)
        conflicts = read.conflicts()
        if conflicts:
            raise ConfigError("; ".join(conflicts))
        return read

    @classmethod
    def refusals(cls, environ: Mapping[str, str | None]) -> list[str]:
        """What `from_env` would refuse in `environ`, judged before it is deployed (the construct, at synthesis):
        None for a variable whose value only the deployment will know. Such a field counts as set (a required one
        is satisfied); the group's conflicts are judged with its default standing in for it, or not at all when it
        holds a number or a switch (what conflicts weigh: a guess there could refuse what would fit)."""
        values, problems, unknown = cls._read(environ)
        if problems:
            return problems
        specs = [cls._settings[field] for field in unknown]
        if any(isinstance(spec.default, int | float) for spec in specs):
            return []
        # Every required field is text (a table's name): any text stands in for it.
        values.update({field: UNKNOWN for field in unknown if cls._settings[field].default is _REQUIRED})
        return cls(**values).conflicts()

    @classmethod
    def _read(cls, env: Mapping[str, str | None]) -> tuple[dict[str, Any], list[str], list[str]]:
        """The fields' values as read, the problems of each variable that could not be used, and the fields set by
        a variable whose value is not known yet (None)."""
        values: dict[str, Any] = {}
        problems: list[str] = []
        unknown: list[str] = []
        for field, spec in cls._settings.items():
            found = next(((name, env[name]) for name in spec.variables if env.get(name, "") != ""), None)
            if found is None:
                if spec.default is _REQUIRED:
                    problems.append(f"{spec.variables[0]} is not set")
                continue
            name, raw = found
            if raw is None:
                unknown.append(field)
                continue
            try:
                values[field] = spec.read(raw)
            except ValueError as exc:
                problems.append(f"{name}={raw!r}: {exc}")
        return values, problems, unknown

    def conflicts(self) -> list[str]:
        """What is wrong with the group's values taken together, each naming its variables (none by default)."""
        return []


def variables(group: type[EnvironmentSettings]) -> dict[str, tuple[str, ...]]:
    """Each field of a settings group -> the variables that set it, first one first."""
    return {name: spec.variables for name, spec in group._settings.items()}


def required(group: type[EnvironmentSettings]) -> list[str]:
    """The variables a group cannot start without (a field with no default), each its field's first name."""
    return [spec.variables[0] for spec in group._settings.values() if spec.default is _REQUIRED]


_ACCESSORS: list[Any] = []


def cached(load: Callable[[], T]) -> Callable[[], T]:
    """The process's reading of a group: made on first use, kept until `forget`."""
    accessor = cache(load)
    _ACCESSORS.append(accessor)
    return accessor


def forget() -> None:
    """Drop every group read so far: the next use reads the environment again."""
    for accessor in _ACCESSORS:
        accessor.cache_clear()
