"""Batch lines' own token budget per key: `batch_daily_tokens` in `--api-key-file`.

Batch lines run behind online traffic and are not held to the key's online limits (rpm, tpm, max_concurrent,
daily_tokens: rostra/http/key_limits.py), which a batch of thousands of lines would exhaust at once for the key's
interactive use. They have a budget of their own instead: the tokens (input and output) the key's batch lines may
spend per UTC day, counted in the usage store (so replicas sharing it share the budget). A line that starts once
the day's budget is spent is answered with a 429 (`rate_limit_exceeded`) in the batch's error file, as a line that
fails online would be; a line admitted within the budget runs to its end.
"""

from __future__ import annotations

from typing import Mapping

from rostra.http.usage_recorder import UsageRecorder
from rostra.store.usage_store import DAY, UsageQuery


class BatchBudgets:
    def __init__(self, usage: UsageRecorder, budgets: Mapping[str, int]):
        self.usage = usage
        self.budgets = dict(budgets)  # a key's fingerprint (its tenant) -> its batch tokens per UTC day

    async def refusal(self, tenant: str | None, now: float) -> str | None:
        """Why a line of `tenant`'s may not start at `now`, or None."""
        budget = self.budgets.get(tenant) if tenant is not None else None
        if budget is None:
            return None
        today = int(now // DAY * DAY)
        await self.usage.flush()  # the lines that just ended are counted
        sums = await self.usage.store.sums(UsageQuery(start=today, end=int(now) + 1, width=DAY, tenant=tenant))
        spent = sum(row.input_tokens + row.output_tokens for row in sums if row.batch)
        if spent < budget:
            return None
        return f"Batch token budget reached: limit {budget}, used {spent} today (UTC)."
