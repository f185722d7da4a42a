"""The Files API (`/v1/files`) and the Batch API (`/v1/batches`): upload a JSONL of requests, come back for the
results. Each line runs through the same routes the online requests take (in-process, behind online traffic:
worker.py), under leases on chunks of lines in the store (rostra/store/batch_store.py)."""
