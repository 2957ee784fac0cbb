"""Gated actions (core.http): the dispatch outbox queues each requested action, the actions worker performs it once.

`outbox` (dispatch side): one SQS message per `interlude.action-requested` event naming the run, node, visit and
effect id, never the request. `worker` (the actions function): effect record claimed before the call and settled
after it (store.effects), egress guard and pinned connection (adapters.delivery.pinned_http), auth headers from
Secrets Manager by reference, retries with backoff through the message's visibility, and the outcome landed on the
run (app.actions).
"""
