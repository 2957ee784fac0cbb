"""Task workers: the client side of `POST /tasks:claim` and the task routes, for the nodes Interlude hands to the
tenant's own code (ModuleX `llm`, `tool`, `agent`, `function`, `knowledge`, `guardrails`; OpenWOP task nodes).

    worker = Worker(base_url, api_key)

    @worker.handler("llm")
    def draft(config, input, context):
        return "the text"

    worker.run()

Imported by nothing in the server: a worker process needs only this package and urllib3."""

from interlude.worker.client import Refused, Task, TaskClient, TransportError
from interlude.worker.runner import Backoff, NonRetryableError, TaskContext, Worker, WorkerRefused

__all__ = [
    "Backoff",
    "NonRetryableError",
    "Refused",
    "Task",
    "TaskClient",
    "TaskContext",
    "TransportError",
    "Worker",
    "WorkerRefused",
]
