"""A webhook dead letter written behind the API of a running local stack, for tests that need one where no
endpoint can be made to fail (the shared stack dials no loopback receiver): a subscription, a dead letter and the
delivery's ledger item, as the callbacks worker leaves them. The delivery names an event its run's log does not hold,
so sending it again is dead-lettered at once by the worker, before anything is dialled."""

from __future__ import annotations

import base64
import json
import os
import time

from interlude import wiring
from interlude.adapters.delivery.subscriptions import dead_letter_record, webhook_message
from interlude.domain.ids import mint_opaque, secret_name, tenant_bound, tenant_of
from interlude.local.stack import ENTRIES_TABLE_NAME, TABLE_NAME
from interlude.store.deliveries import DeliveryStore, Notice
from interlude.store.notifications import Notification, NotificationStore
from interlude.store.table import Table
from interlude.store.webhooks import WebhookStore
from tests.support.local_stack import stack_client

# Never dialled: the delivery's event cannot be projected, which the worker finds before it connects.
UNDIALLED_URL = "https://8.8.8.8/hook"
MISSING_SEQUENCE = 10**6


def dead_letter_behind_the_api(stack_info: dict[str, str], run_id: str) -> tuple[str, str]:
    """(subscription id, delivery id) of a new subscription of the run's tenant and its one dead letter."""
    client = stack_client(stack_info, "dynamodb")
    webhooks = WebhookStore(TABLE_NAME, client)
    webhook_id = tenant_bound(tenant_of(run_id), mint_opaque())
    name = secret_name(wiring.SECRET_PREFIXES["SUBSCRIPTION_SECRET_PREFIX"], *webhook_id.split("/", 1))
    secret = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    made = stack_client(stack_info, "secretsmanager").create_secret(
        Name=name, SecretString=json.dumps({"current": secret, "previous": []})
    )
    record = {"webhookId": webhook_id, "url": UNDIALLED_URL, "events": ["interrupt.requested"], "secretName": name}
    webhooks.put({**record, "createdAt": "2026-01-01T00:00:00Z"}, made["VersionId"], 10**6)
    event = {"sequence": MISSING_SEQUENCE, "eventId": mint_opaque(), "type": "interrupt.requested"}
    message = webhook_message(webhook_id, run_id, event)
    now = time.time()
    webhooks.put_dead_letter(dead_letter_record(message, 1, "retries_exhausted", 500, now))
    ledger = DeliveryStore(Table(TABLE_NAME, ENTRIES_TABLE_NAME, client))
    ref = Notice(run_id, message["deliveryId"], event["type"], MISSING_SEQUENCE, webhook_id)
    claim = ledger.claim(ref, now, 60)
    attempt = {"noticeId": message["deliveryId"], "subscriptionId": webhook_id, "type": event["type"], "attempt": 1}
    failed = {**attempt, "status": "failed", "httpStatus": 500, "errorClass": "http_status", "final": True}
    assert ledger.settle(ref, claim.attempt, ledger.DEAD, failed, now)
    return webhook_id, tenant_bound(tenant_of(run_id), message["deliveryId"])


def dead_notification_behind_the_api(stack_info: dict[str, str], run_id: str) -> str:
    """The id of a new dead-lettered notification of the run, as the notify worker leaves one whose sends all failed."""
    client = stack_client(stack_info, "dynamodb")
    ledger = NotificationStore(Table(TABLE_NAME, ENTRIES_TABLE_NAME, client))
    notification_id = f"ntf_{mint_opaque()}"
    record = {
        "notificationId": notification_id,
        "nodeId": "review",
        "interruptId": mint_opaque(),
        "principalId": "nobody",
        "purpose": "approval",
    }
    ref = Notification(run_id, notification_id, record)
    now = time.time()
    claim = ledger.claim(ref, now, 60)
    assert ledger.settle(ref, claim.attempt, ledger.DEAD, {**record, "channels": {}}, now)
    return notification_id
