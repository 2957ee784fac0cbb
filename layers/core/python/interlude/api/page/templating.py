"""Every page's HTML comes from a Jinja2 template: the approval page's (page/templates, names `page/…`) and the
console's (console/templates, names `console/…`), which share one layout and one form renderer.

One environment per process, made by the first render: a request that renders no page never imports Jinja2.
Autoescape is on for every template, so a value reaches the markup escaped unless a template made it; values are
escaped as html.escape does (quotes included), so the markup reads as it did when the pages were built in Python.
StrictUndefined: a name a template misspells fails the render instead of printing nothing. Each template is
loaded once and kept for the life of the instance (no reload check, no re-parse). The package layer carries every
template already compiled to a Python module (`compile_all`, called by interlude_cdk/layer.py, whose bytecode step
then compiles those modules for the runtime): a new instance imports their bytecode instead of parsing templates.
They are used only when the Jinja2 that wrote them is the one running; a checkout has none and compiles each
template on its first use.

The rule the templates keep: Python hands them text and numbers; every tag is written in a template.
"""

from __future__ import annotations

import shutil
from functools import cache
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlude.api.page import text

if TYPE_CHECKING:
    import jinja2

API_DIR = Path(__file__).resolve().parent.parent
# Template name prefix → its folder.
TEMPLATE_DIRS = {"page": API_DIR / "page" / "templates", "console": API_DIR / "console" / "templates"}
# Where the package layer's build writes the compiled templates, and the file naming the Jinja2 version that wrote them.
COMPILED_DIR = API_DIR / "page" / "compiled_templates"
COMPILED_BY = "jinja2-version.txt"


def render(name: str, /, **context: Any) -> str:
    """The template's markup (marked as markup, so another template takes it as it is)."""
    return markup(environment().get_template(name).render(context))


def markup(html: str) -> str:
    """Markup a template rendered, for another template (a page's body for the layout)."""
    from markupsafe import Markup

    return Markup(html)


@cache
def environment() -> jinja2.Environment:
    return make_environment(COMPILED_DIR)


def make_environment(compiled_dir: Path | None) -> jinja2.Environment:
    """The environment every page renders with: from the templates compiled under `compiled_dir` when the running
    Jinja2 wrote them, else from their sources."""
    # Imported here, once: only a request that renders a page pays for Jinja2.
    import jinja2
    from markupsafe import Markup

    def escaped(value: Any) -> Any:
        return value if hasattr(value, "__html__") else Markup(escape(str(value), quote=True))

    loader: jinja2.BaseLoader = jinja2.PrefixLoader(
        {prefix: jinja2.FileSystemLoader(folder) for prefix, folder in TEMPLATE_DIRS.items()}
    )
    if compiled_dir is not None and _read(compiled_dir / COMPILED_BY) == jinja2.__version__:
        loader = jinja2.ModuleLoader(compiled_dir)
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=escaped,
        auto_reload=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(unfilled_parts=text.unfilled_parts, state_words=text.state_words)
    return env


def compile_all(target: Path) -> None:
    """Every template written under `target` as a Python module, and the Jinja2 version that wrote them."""
    shutil.rmtree(target, ignore_errors=True)
    make_environment(None).compile_templates(target, zip=None, ignore_errors=False)
    (target / COMPILED_BY).write_text(jinja2_version())


def jinja2_version() -> str:
    import jinja2

    return jinja2.__version__


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
