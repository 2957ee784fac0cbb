"""The mail the local stack sent (issue 14): moto's SES keeps every message; this reads them back as mail.

The local gateway serves them (development only, never deployed): `GET /_local/outbox` lists them as JSON
(newest last: each message's recipients as a mail program reads its `To`, its subject, its headers, its plain text and
its HTML), `GET /_local/outbox/{id}` shows one as the page its recipient would read (its HTML part), and
`interlude outbox --local` prints the list.
"""

from __future__ import annotations

import email
import html
import json
from email.message import EmailMessage
from email.policy import default as default_policy
from typing import Any

from interlude.local import LOCAL_ACCOUNT, LOCAL_REGION

OUTBOX_PATH = "/_local/outbox"
# The from-address the local stack sends as (verified in moto's SES at start).
LOCAL_FROM_ADDRESS = "approvals@interlude.local"


def _parts(message: EmailMessage) -> tuple[str, str]:
    text, page = "", ""
    for part in message.walk():
        if part.get_content_type() == "text/plain" and not text:
            text = part.get_content()
        elif part.get_content_type() == "text/html" and not page:
            page = part.get_content()
    return text, page


def sent_mail() -> list[dict[str, Any]]:
    """Every message moto's SES accepted in this process, oldest first."""
    from moto.ses.models import ses_backends

    backend = ses_backends[LOCAL_ACCOUNT][LOCAL_REGION]
    out = []
    for sent in list(backend.sent_messages):
        raw = getattr(sent, "raw_data", None)
        if raw is None:
            out.append({"id": sent.id, "from": sent.source, "to": [], "subject": getattr(sent, "subject", ""), "text": "", "html": ""})
            continue
        message = email.message_from_string(raw, policy=default_policy)
        text, page = _parts(message)
        out.append(
            {
                "id": sent.id,
                "from": str(message["From"] or sent.source),
                "to": [address.addr_spec for header in message.get_all("To") or [] for address in header.addresses],
                "subject": str(message["Subject"] or ""),
                "headers": [[name, str(value)] for name, value in message.items()],
                "text": text,
                "html": page,
            }
        )
    return out


def serve(path: str) -> dict[str, Any]:
    """A payload-2.0-shaped answer for a `/_local/outbox` path."""
    mail = sent_mail()
    rest = path[len(OUTBOX_PATH) :].strip("/")
    if not rest:
        return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps({"messages": mail})}
    found = next((m for m in mail if m["id"] == rest), None)
    if found is None:
        return {"statusCode": 404, "headers": {"Content-Type": "text/plain"}, "body": "no such message"}
    page = found["html"] or f"<pre>{html.escape(found['text'])}</pre>"
    head = (
        f"<p><small>From {html.escape(found['from'])} to {html.escape(', '.join(found['to']))}: "
        f"<strong>{html.escape(found['subject'])}</strong></small></p><hr>"
    )
    return {"statusCode": 200, "headers": {"Content-Type": "text/html; charset=utf-8"}, "body": head + page}


def verify_local_sender() -> dict[str, str]:
    """Verify the local from-address in moto's SES; the notify function's environment (SES_FROM_ADDRESS)."""
    import boto3

    from interlude.config.notify import SES_FROM_ADDRESS_ENV

    boto3.client("ses").verify_email_identity(EmailAddress=LOCAL_FROM_ADDRESS)
    return {SES_FROM_ADDRESS_ENV: LOCAL_FROM_ADDRESS}
