"""Client requests that arrive in one turn of the loop share one step of their partition's
core (PartitionDriver.step_together): each gets its own result or error, as separate steps
would give them, for one outbox poll, one deadline and one after-step."""

import asyncio

import pytest

from kraft.groups import CoordinatorError
from kraft.protocol import ErrorCode

from .cluster_helpers import wait_for


def test_requests_of_one_turn_share_a_step_and_keep_their_own_answers(node):
    wait_for(lambda: node.node.coordinators.get(0) is not None and node.node.offsets[0].core.is_leader, 30,
             "the offsets partition's coordinator")
    driver = node.node.offsets[0]
    steps = [0]
    driver.step_listeners.append(lambda core: steps.__setitem__(0, steps[0] + 1))
    seen: list[int] = []

    def record(coordinator, now: int) -> int:  # noqa: ANN001
        seen.append(steps[0])
        return len(seen)

    def refuse(coordinator, now: int) -> None:  # noqa: ANN001
        raise CoordinatorError(ErrorCode.not_coordinator, "refused on purpose")

    async def one_turn() -> list:
        return await asyncio.gather(node.node.run(0, record), node.node.run(0, refuse), node.node.run(0, record),
                                    node.node.run(0, record), return_exceptions=True)

    first, refused, *rest = node.call(one_turn())
    assert [first, *rest] == [1, 2, 3]
    assert isinstance(refused, CoordinatorError) and refused.error == ErrorCode.not_coordinator
    assert len(set(seen)) == 1, f"stepped apart: listener counts {seen}"  # no step ended between them


def test_a_request_whose_client_left_is_not_run(node):
    wait_for(lambda: node.node.coordinators.get(0) is not None, 30, "the offsets partition's coordinator")
    ran: list[str] = []

    async def cancelled_then_another() -> object:
        gone = asyncio.ensure_future(node.node.run(0, lambda c, now: ran.append("gone")))
        kept = asyncio.ensure_future(node.node.run(0, lambda c, now: ran.append("kept") or "kept"))
        await asyncio.sleep(0)  # both queued for the turn's step
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        return await kept

    assert node.call(cancelled_then_another()) == "kept"
    assert ran == ["kept"]
