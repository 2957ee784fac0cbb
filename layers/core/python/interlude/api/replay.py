"""Routes that send what failed again (issue 30 item 5): one dead letter, every dead letter of a scope (a
recovery), and a run's failed core.http action."""

from __future__ import annotations

from urllib.parse import unquote

from aws_lambda_powertools.event_handler.api_gateway import Response

from interlude.api.http import json_response, parsed, principal_for
from interlude.api.routes import route
from interlude.app.replay import Replay, bound_delivery, unit_id
from interlude.composition import services
from interlude.domain.ids import check_author_id, from_wire
from interlude.domain.models.replay import ActionRetried, RecoverRequest, Recovery, Replayed


def replay() -> Replay:
    return services().replay


@route("retryWebhookDelivery")
def retry_webhook_delivery(webhookId: str, deliveryId: str) -> Response:  # noqa: N803 - the path parameters' names
    principal = principal_for("retryWebhookDelivery")
    webhook_id = from_wire(webhookId, what="webhookId")
    delivery_id = bound_delivery(from_wire(deliveryId, what="deliveryId"))
    return json_response(200, Replayed.model_validate(replay().retry_webhook_delivery(principal, webhook_id, delivery_id)))


@route("recoverWebhookDeliveries")
def recover_webhook_deliveries(webhookId: str) -> Response:  # noqa: N803
    principal = principal_for("recoverWebhookDeliveries")
    request = parsed(RecoverRequest)
    webhook_id = from_wire(webhookId, what="webhookId")
    recovered = replay().recover_webhook(principal, webhook_id, request.since, request.until)
    return json_response(200, Recovery.model_validate(recovered))


@route("getWebhookRecovery")
def get_webhook_recovery(webhookId: str) -> Response:  # noqa: N803
    principal = principal_for("getWebhookRecovery")
    recovery = replay().webhook_recovery(principal, from_wire(webhookId, what="webhookId"))
    return json_response(200, Recovery.model_validate(recovery))


@route("retryRunDelivery")
def retry_run_delivery(runId: str, deliveryId: str) -> Response:  # noqa: N803
    principal = principal_for("retryRunDelivery")
    notice_id = unit_id(unquote(deliveryId), "deliveryId")
    return json_response(200, Replayed.model_validate(replay().retry_run_delivery(principal, from_wire(runId), notice_id)))


@route("recoverRunDeliveries")
def recover_run_deliveries(runId: str) -> Response:  # noqa: N803
    principal = principal_for("recoverRunDeliveries")
    recovered = replay().recover_run(principal, from_wire(runId), "callback-deliveries")
    return json_response(200, Recovery.model_validate(recovered))


@route("retryRunNotification")
def retry_run_notification(runId: str, notificationId: str) -> Response:  # noqa: N803
    principal = principal_for("retryRunNotification")
    notification_id = unit_id(unquote(notificationId), "notificationId")
    retried = replay().retry_notification(principal, from_wire(runId), notification_id)
    return json_response(200, Replayed.model_validate(retried))


@route("recoverRunNotifications")
def recover_run_notifications(runId: str) -> Response:  # noqa: N803
    principal = principal_for("recoverRunNotifications")
    recovered = replay().recover_run(principal, from_wire(runId), "notifications")
    return json_response(200, Recovery.model_validate(recovered))


@route("retryRunAction")
def retry_run_action(runId: str, nodeId: str) -> Response:  # noqa: N803
    principal = principal_for("retryRunAction")
    retried = replay().retry_action(principal, from_wire(runId), check_author_id(unquote(nodeId), "nodeId"))
    return json_response(200, ActionRetried.model_validate(retried))
