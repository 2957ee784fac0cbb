"""The only room that talks to DynamoDB."""

from .dynamo import Conflict, Store, create_table

__all__ = ["Conflict", "Store", "create_table"]
