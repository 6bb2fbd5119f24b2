"""A node stops on a broken rule of its own, as on a failed disk: a Raft invariant or a group
coordinator's state rule, raised inside a step of a real node (in this process, so the
failure can be read), stops every partition and answers nothing more."""

from kraft.cli.cluster_client import UNREACHABLE, create_topic
from kraft.groups import GroupStateError
from kraft.groups.classic import STABLE, ClassicGroup
from kraft.protocol import ErrorCode
from kraft.raft import InvariantViolation, RaftCore

from .cluster_helpers import wait_for


def stopped_on(node, error_type) -> None:  # noqa: ANN001
    assert isinstance(node.node.failure, error_type), node.node.failure
    assert node.node.failed.is_set()
    try:
        answer = create_topic(node.client_port, "after-the-failure", 1, timeout_ms=2000, retry_s=0)
    except UNREACHABLE:
        return
    assert answer.error_code != ErrorCode.none  # nothing is acknowledged after it


def test_a_group_coordinator_breaking_its_state_rules_stops_the_node(node):
    wait_for(lambda: node.node.coordinators.get(0) is not None, 30, "the offsets partition's coordinator")

    def illegal(coordinator, now: int) -> None:  # noqa: ANN001
        ClassicGroup("g", now).transition(STABLE, now)  # Empty -> Stable: Kafka's ClassicGroup forbids it

    async def step() -> None:
        await node.node.run(0, illegal)

    node.call(step())
    stopped_on(node, GroupStateError)


def test_a_vote_granted_twice_in_an_epoch_stops_the_node(node):
    wait_for(lambda: node.node.is_leader, 30, "the single voter's election")

    def second_vote(core: RaftCore, now: int) -> None:
        core.quorum.become_voted(2, now)  # it voted for itself in this epoch

    async def step() -> None:
        node.node.step(second_vote)

    node.call(step())
    stopped_on(node, InvariantViolation)
    assert "having voted for 1" in str(node.node.failure)
