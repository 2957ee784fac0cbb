"""What every Lambda entry point does around its import, once per instance.

`importing()`: what an import runs in: `collector_paused()`, the cyclic collector does not walk what the import makes,
and `forward_refs_compiled_at_use()`. `defer_unused_modules()`: what the libraries import and no invocation runs is
registered with `lazy_package()` before the entry point's first import. `lazy_package()`: a package
(Powertools', the SDK's) is registered without running its `__init__`, so importing one of its submodules loads that
submodule alone (Powertools' `event_handler/__init__` imports every resolver it has, `utilities/data_classes/__init__`
every event data class, about forty modules); the `__init__` still answers every name it defines, on first ask
(PEP 562's module `__getattr__`), so another importer in the same process (a test, the local stack) sees the package
as it ships.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Powertools packages whose `__init__` imports far more than a function uses.
# Every resolver Powertools has (AppSync's brings asyncio, Bedrock's, VPC Lattice's, ...); the API uses one.
EVENT_HANDLER = "aws_lambda_powertools.event_handler"
# Every event data class (about forty modules). The HTTP resolver imports seven by name from the package; the batch
# utility imports the stream and queue records' modules, and `sqs_event` asks the package for `S3Event`.
DATA_CLASSES = "aws_lambda_powertools.utilities.data_classes"
# Packages of the SDK's and pydantic's whose `__init__` no invocation needs, though what the functions import imports
# the package or a submodule of it. urllib3's HTTP/2 opt-in (`urllib3.connection` imports `urllib3.http2.probe`; the
# package's `__init__` imports importlib.metadata to check h2's version for an opt-in nothing here makes).
URLLIB3_HTTP2 = "urllib3.http2"
# Installed distributions' metadata (zipfile, csv, email's message classes, importlib.resources): pydantic's plugin
# loader imports it with the first model's validator, and asks it nothing while plugins are disabled (every handler
# sets PYDANTIC_DISABLE_PLUGINS).
IMPORTLIB_METADATA = "importlib.metadata"
# botocore's documentation writer (ServiceDocumenter, for boto3's docs): its `__init__` imports it, where a client's
# lazy docstrings need only `botocore.docs.docstring` and what that imports.
BOTOCORE_DOCS = "botocore.docs"
# Modules (not packages) registered the same way, their names taken by an importer at import and called only on a path
# a resolve never takes. botocore's reST writer (with its docstring parser, html.parser and the style module): a
# client's lazy docstrings import `DocumentStructure` and call it when a docstring is read (help(), pydoc).
BOTOCORE_RESTDOC = "botocore.docs.bcdoc.restdoc"
# dateutil's date parser (calendar, locale, its parser tables): botocore parses a timestamp with it only where a
# response or a credential's expiry carries one as text; none of the DynamoDB calls a resolve makes does.
DATEUTIL_PARSER = "dateutil.parser"
# Standard-library modules imported for a path a resolve never takes. configparser: botocore reads the shared config
# and credentials files with it, where one exists (a Lambda instance has none). gzip: Powertools' JMESPath function
# `powertools_base64_gzip`, botocore's request compression (no DynamoDB operation compresses) and its loader's
# gzipped models (the layer's SDK data is plain JSON).
CONFIGPARSER = "configparser"
GZIP = "gzip"
# asyncio: Powertools' batch utility imports it for its async processor (the functions' processors are synchronous).
ASYNCIO = "asyncio"
# The terminal colour themes traceback imports (3.13 on: five dataclasses; on 3.14 part of the 21 M of a cold resolve's
# 1,055 M instructions these deferrals cut, docs/adr/0164's figures, `bench/cold_resolve.py --instructions`), which it
# reads only where it formats a traceback; logging imports traceback.
COLORIZE = "_colorize"


def defer_unused_modules() -> None:
    """Register the modules above that the SDK, Powertools and the standard library import and no invocation runs, so
    that each loads at its first use, if any: every entry point calls it before its first import (a module imported
    already is left as it is)."""
    lazy_package(GZIP, by_name=False, called=("GzipFile", "compress", "open"))
    lazy_package(CONFIGPARSER, by_name=False)
    lazy_package(ASYNCIO, by_name=False)
    lazy_package(COLORIZE, by_name=False)
    lazy_package(URLLIB3_HTTP2, by_name=False)
    lazy_package(IMPORTLIB_METADATA, by_name=False, called=("entry_points",))
    lazy_package(BOTOCORE_DOCS, by_name=False)
    lazy_package(BOTOCORE_RESTDOC, by_name=False, called=("DocumentStructure",))
    lazy_package(DATEUTIL_PARSER, by_name=False, called=("parse",))


@contextmanager
def collector_paused() -> Iterator[None]:
    # An import makes tens of thousands of objects that live as long as the process (modules, classes, functions), and
    # the cyclic collector walked them all, more than once, while they were being made: about a tenth of a handler's
    # import CPU. It stays off until they exist; then they go to the permanent generation (never walked again) and it
    # is on for the invocations. Cost: the few hundred cyclic garbage objects an import leaves (≈ 200 KB) are frozen
    # with them, once per instance.
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


@contextmanager
def forward_refs_compiled_at_use() -> Iterator[None]:
    # Python 3.14's typing compiles each string annotation of a NamedTuple or TypedDict class as the class is made
    # (`typing._make_forward_ref`, "for compatibility": a syntax error is raised there rather than where the annotation
    # is evaluated); `from __future__ import annotations` makes every annotation a string, and pydantic-core's schema
    # module alone has some four hundred. While an import runs they are made as 3.14's `ForwardRef` makes them, and
    # compiled where one is evaluated (`ForwardRef.__forward_code__`): 60 M of a cold resolve's 1,034 M instructions
    # (docs/adr/0164's figures, `bench/cold_resolve.py --instructions`). Earlier Pythons compile in `ForwardRef`
    # itself, and have no `_make_forward_ref`: nothing changes there.
    import typing

    make = getattr(typing, "_make_forward_ref", None)
    if make is None:
        yield
        return

    def uncompiled(code: str, *, parent_fwdref: Any = None, **kwargs: Any) -> Any:
        if parent_fwdref is not None:
            return make(code, parent_fwdref=parent_fwdref, **kwargs)
        return typing.ForwardRef(code, **kwargs)  # annotationlib's, on 3.14

    setattr(typing, "_make_forward_ref", uncompiled)  # noqa: B010  # a name typing's stubs leave out
    try:
        yield
    finally:
        setattr(typing, "_make_forward_ref", make)  # noqa: B010


@contextmanager
def importing() -> Iterator[None]:
    """What an import that lasts as long as the instance runs in: the collector paused, forward references compiled
    where they are evaluated."""
    with collector_paused(), forward_refs_compiled_at_use():
        yield


def lazy_package(name: str, *, by_name: bool = True, called: tuple[str, ...] = ()) -> None:
    """Register the package `name` without running its `__init__`, unless something imported it already (a module
    `name`: without running it).

    `by_name`: a name the `__init__` imports from one of its own submodules (`from .alb_event import ALBEvent`) is
    answered by importing that submodule alone. Any other name the package defines runs the whole `__init__`, once,
    and is answered from it; a submodule's name imports that submodule. `called`: functions of the package's that an
    importer takes by name but calls only on a path not taken here (pydantic's plugin loader takes importlib.metadata's
    `entry_points`, and calls it only where plugins are enabled): each is answered with a function that runs the
    `__init__` at its first call and calls the package's own."""
    # Imported here: an entry point imports this module before it pauses the collector, and whatever this module
    # imports at its top is made with the collector on (they load, paused, with the handler's first imports).
    import importlib
    import importlib.util
    import sys

    if name in sys.modules:
        return
    parent_name, _, child = name.rpartition(".")
    if not parent_name or parent_name in sys.modules:
        spec = importlib.util.find_spec(name)
    else:
        # Registered before its parent is imported, since the parent may import it while being imported itself
        # (urllib3 imports urllib3.http2): found where the parent's spec says its submodules are.
        import importlib.machinery

        parent_spec = importlib.util.find_spec(parent_name)
        locations = parent_spec.submodule_search_locations if parent_spec is not None else None
        spec = importlib.machinery.PathFinder.find_spec(name, locations) if locations else None
    if spec is None or spec.loader is None or spec.origin is None:  # pragma: no cover - a runtime dependency
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    source_of = _names_imported_from_submodules(spec.origin) if by_name else {}

    def whole() -> Any:
        """The package as it ships: its own `__init__` run, once."""
        if "__getattr__" in package.__dict__:
            del package.__dict__["__getattr__"]
            loader.exec_module(package)
        return package

    def deferred(attr: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(whole(), attr)(*args, **kwargs)

        return call

    def __getattr__(attr: str) -> object:
        if attr == "__path__":
            # A module has none (the import system asks, for every `from module import name`), a package its own.
            raise AttributeError(attr)
        if attr in source_of:
            value = getattr(importlib.import_module(f"{name}.{source_of[attr]}"), attr)
            package.__dict__[attr] = value
            return value
        if attr in called:
            return deferred(attr)
        # A submodule (`event_handler.content_types`, which the shipped `__init__` would have imported): that one alone.
        if spec.submodule_search_locations is not None and importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")
        # Any other name: run the package's own __init__ once, then answer from it.
        return getattr(whole(), attr)

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = package
    if parent_name:
        importlib.import_module(parent_name).__dict__[child] = package


def deferred(module: object) -> bool:
    """Whether `module` is registered by `lazy_package` and has not run yet (nothing has asked it for a name)."""
    hook = getattr(module, "__dict__", {}).get("__getattr__")
    return getattr(hook, "__qualname__", "") == "lazy_package.<locals>.__getattr__"


def _names_imported_from_submodules(init: str) -> dict[str, str]:
    """{name: submodule} for each `from .submodule import name` at the top of the package's __init__ at `init`."""
    import ast  # loaded already wherever Powertools is (inspect imports it)

    with open(init, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and "." not in node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = node.module
    return found
