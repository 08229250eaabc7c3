"""Contracts shared by every her-os service.

What the services share is a contract, not code paths: the JSONL transcript payload, the
observability event, the creature registry, the auth rule, and the atomic JSONL capture that
writes and reads them. A change to a contract is one edit here, with its tests.
"""

SCHEMA_VERSION = 1
