"""Every page's HTML comes from a Jinja2 template: the approval page's (page/templates, names `page/…`) and the
console's (console/templates, names `console/…`), which share one layout and one form renderer.

One environment per process, made by the first render: a request that renders no page never imports Jinja2.
Autoescape is on for every template, so a value reaches the markup escaped unless a template made it; values are
escaped as html.escape does (quotes included), so the markup reads as it did when the pages were built in Python.
StrictUndefined: a name a template misspells fails the render instead of printing nothing. Each template is
compiled on its first use and kept for the life of the instance (no reload check, no re-parse).

The rule the templates keep: Python hands them text and numbers; every tag is written in a template.
"""

from __future__ import annotations

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


def render(name: str, /, **context: Any) -> str:
    """The template's markup (marked as markup, so another template takes it as it is)."""
    return markup(environment().get_template(name).render(context))


def markup(html: str) -> str:
    """Markup a template rendered, for another template (a page's body for the layout)."""
    from markupsafe import Markup

    return Markup(html)


@cache
def environment() -> jinja2.Environment:
    # Imported here, once: only a request that renders a page pays for Jinja2.
    import jinja2
    from markupsafe import Markup

    def escaped(value: Any) -> Any:
        return value if hasattr(value, "__html__") else Markup(escape(str(value), quote=True))

    env = jinja2.Environment(
        loader=jinja2.PrefixLoader({prefix: jinja2.FileSystemLoader(folder) for prefix, folder in TEMPLATE_DIRS.items()}),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=escaped,
        auto_reload=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(unfilled_parts=text.unfilled_parts)
    return env
