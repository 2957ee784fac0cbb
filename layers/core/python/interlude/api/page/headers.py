"""The headers every answer where people browse carries (wiring.page_module: `/`, the console, the approval links),
whatever made it: a page, a redirect, a refusal, the JSON envelope an API client asked for. Declared here alone: the
api function's entry point (interlude.api.app.lambda_handler) gives them to every such answer, and a page that styles
itself sends only its own Content-Security-Policy, naming its style's nonce.
"""

from __future__ import annotations

CSP = "Content-Security-Policy"


def content_security_policy(style_nonce: str | None = None) -> str:
    """Nothing loads but the page's own style (by its nonce) and its images; no script at all; no framing."""
    style = f"style-src 'nonce-{style_nonce}'; " if style_nonce else ""
    return (
        f"default-src 'none'; {style}img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )


def page_headers() -> dict[str, str]:
    return {
        CSP: content_security_policy(),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
        "X-Frame-Options": "DENY",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
    }


def with_page_headers(headers: dict[str, str] | None) -> dict[str, str]:
    """An answer's headers with the pages' headers, its own Content-Security-Policy (a page's nonce) kept."""
    own = headers or {}
    csp = next((value for name, value in own.items() if name.lower() == CSP.lower()), None)
    kept = {name: value for name, value in own.items() if name.lower() not in {n.lower() for n in page_headers()}}
    return {**kept, **page_headers(), **({CSP: csp} if csp else {})}
