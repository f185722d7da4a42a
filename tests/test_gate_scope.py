"""One scope per request (rostra/http/scope.py): what a request holds (its admission slot, its model's lease, what
`prepare` opened) is given back exactly once, by the route or by whoever outlives it (a stream, a background run),
in the orders that hurt: each pair of events in one loop turn (a disconnect and the first token, the deadline and
prepare's end, a cancel and a background run's start)."""

from __future__ import annotations

import asyncio

import pytest

from harness import MODEL, InProcessServer
from rostra.http.scope import RequestScope
from rostra.images.budget import RequestImageBudgets
from rostra.serving.deadline import NO_DEADLINE

SCRIPT = [{"match": "slow", "output": "one two three four five six seven eight nine ten", "delay_ms": 50},
          {"match": "", "output": "Hello."}]
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "slow"}]}


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def held(server: InProcessServer) -> tuple[int, int, int]:
    """What requests hold now: running admissions, waiting ones, model leases (all 0 when nothing runs)."""
    state = server.app.state.rostra
    return state.admission.running, state.admission.waiting, sum(slot.leases for slot in state.models.slots)


def scope_with(log: list[str]) -> RequestScope:
    return RequestScope(None, None, NO_DEADLINE, RequestImageBudgets())  # type: ignore[arg-type]


def test_a_scope_closes_once_the_last_taken_first_whoever_closes_it():
    log: list[str] = []

    async def closing_async() -> None:
        await asyncio.sleep(0)
        log.append("job")

    def failing() -> None:
        raise RuntimeError("boom")

    async def main():
        scope = scope_with(log)
        scope.hold(lambda: log.append("slot"))
        scope.hold(lambda: log.append("lease"))
        scope.hold(failing)  # logged; the others still run
        scope.hold(closing_async)
        scope.hold(lambda: log.append("last"))
        scope.close()  # from a callback: the synchronous ones now, the rest in a task
        scope.close()
        await scope.aclose()  # (the task may not have run yet: nothing runs twice)
        for _ in range(5):
            await asyncio.sleep(0)
        assert scope.closed
        scope.hold(lambda: log.append("late"))  # held after the end: given back at once
        await scope.aclose()

    run(main())
    assert log == ["last", "job", "lease", "slot", "late"]


def test_a_scope_handed_off_is_not_closed_by_the_route():
    log: list[str] = []

    async def main():
        scope = scope_with(log)
        scope.hold(lambda: log.append("slot"))
        async with scope:
            owner = scope.hand_off()
        assert log == []
        owner.close()
        async with scope:  # a route that did not hand it off closes it; closed already, nothing runs again
            pass

    run(main())
    assert log == ["slot"]


@pytest.mark.parametrize("hang_up_first", [True, False])
def test_a_disconnect_and_the_first_token_in_one_loop_turn(tmp_path, hang_up_first):
    """A streamed request whose client goes away in the loop turn its first token comes: its scope is closed by
    the stream's end exactly once (never a second release of the slot: `running` would go below 0)."""
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1) as server:
            exchange = server.call("POST", "/v1/chat/completions", {**CHAT, "stream": True})
            await exchange.wait_for('"role"')  # the stream started; its first token is on its way
            if hang_up_first:  # gone as the engine sends its first token
                await asyncio.sleep(0.05)
                exchange.hang_up()
            else:  # the first token out, then gone at once
                await exchange.wait_for('"content":"one')
                exchange.hang_up()
            await exchange.finished(timeout=10)
            after = await server.client.post("/v1/chat/completions", json=CHAT)
            return held(server), after.status_code
    counts, after = run(scenario())
    assert counts == (0, 0, 0) and after == 200


@pytest.mark.parametrize("margin", [-0.02, 0.0, 0.02])
def test_the_deadline_and_the_end_of_prepare_in_one_loop_turn(tmp_path, monkeypatch, margin):
    """prepare ends around the moment the deadline passes: a 504 or an answer, never a job left open (its close
    is held by the scope the moment prepare returns), nor a slot or lease kept."""
    from rostra.serving.chat import ChatService
    from rostra.serving.job import Job

    closed: list[str] = []
    returned: list[str] = []
    prepare, close = ChatService.prepare, Job.close

    async def timed(self, request):
        job = await prepare(self, request)
        await asyncio.sleep(0.3 + margin)
        returned.append(job.id)
        return job

    async def counted(self):
        closed.append(self.id)
        await close(self)

    monkeypatch.setattr(ChatService, "prepare", timed)
    monkeypatch.setattr(Job, "close", counted)

    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, request_timeout=0.3) as server:
            response = await server.client.post("/v1/chat/completions", json={**CHAT, "messages": [
                {"role": "user", "content": "hi"}]})
            for _ in range(10):
                await asyncio.sleep(0)
            return response.status_code, held(server)
    status, counts = run(scenario())
    assert status in (200, 504) and counts == (0, 0, 0)
    assert closed == returned  # a job prepare handed over is closed, once; one it never returned is its own


@pytest.mark.parametrize("cancel_first", [True, False])
def test_a_cancel_and_a_background_run_start_in_one_loop_turn(tmp_path, cancel_first):
    """POST /v1/responses/{id}/cancel in the loop turn a background response is stored and its run starts: the run
    ends cancelled, and its scope (the slot and the lease it took over) is closed once, by the run's end."""
    async def scenario():
        async with InProcessServer(tmp_path, SCRIPT, max_concurrency=1) as server:
            created = await server.client.post("/v1/responses", json={"model": MODEL, "input": "slow",
                                                                      "background": True})
            response_id = created.json()["id"]
            if cancel_first:
                cancelled = await server.client.post(f"/v1/responses/{response_id}/cancel")
            else:
                await asyncio.sleep(0)
                cancelled = await server.client.post(f"/v1/responses/{response_id}/cancel")
            for _ in range(100):
                if held(server) == (0, 0, 0):
                    break
                await asyncio.sleep(0.02)
            final = await server.client.get(f"/v1/responses/{response_id}")
            after = await server.client.post("/v1/chat/completions", json=CHAT)
            return created.status_code, cancelled.status_code, final.json()["status"], held(server), after.status_code
    created, cancelled, status, counts, after = run(scenario())
    assert created == 200 and cancelled == 200 and status == "cancelled"
    assert counts == (0, 0, 0) and after == 200
