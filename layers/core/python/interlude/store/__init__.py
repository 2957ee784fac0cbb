"""The only room that talks to DynamoDB."""

from interlude.store.dynamo import Conflict, Store, create_table

__all__ = ["Conflict", "Store", "create_table"]
