"""Deadlines on EventBridge Scheduler: schedule names and expressions, bucket inputs, the Scheduler adapter, the outbox
handler that creates and deletes schedules, and nothing else (the decisions live in engine.deadlines)."""
