"""How replay builds a partition: a PartitionRecord checked, a PartitionChangeRecord merged.

Every replica derives fencing from the partitions it holds (see `kraft.metadata.delta`), so a
partition is checked as it is built for what that derivation relies on: distinct replicas,
the ISR among them, the leader in the ISR or none. Id lists are interned (`intern_ids`), so
partitions with the same replicas share one tuple.

A PartitionChangeRecord merges as Kafka's PartitionRegistration.merge does: each field the
record sets replaces the partition's; naming a leader (even the same one) bumps the leader
epoch; the partition epoch goes up by one whatever changed.

Both raise ValueError saying what is wrong; the delta says which partition.
"""

from kraft.metadata.image import NO_LEADER, PartitionRegistration, intern_ids
from kraft.metadata.records import NO_LEADER_CHANGE, PartitionChangeRecord, PartitionRecord

_MIGRATING = bytes(16)  # Kafka's DirectoryId.MIGRATING: no directory assigned yet
_NO_CHANGE = -1  # PartitionChangeRecord.leader_recovery_state: unchanged


def from_record(r: PartitionRecord) -> PartitionRegistration:
    """The partition a PartitionRecord declares."""
    return _checked(
        r.replicas,
        r.isr,
        r.removing_replicas,
        r.adding_replicas,
        r.leader,
        r.leader_recovery_state,
        r.leader_epoch,
        r.partition_epoch,
        r.directories,
        r.eligible_leader_replicas,
        r.last_known_elr,
    )


def merge(p: PartitionRegistration, r: PartitionChangeRecord) -> PartitionRegistration:
    """`p` with the change `r` applied, by Kafka's PartitionRegistration.merge."""
    if r.leader == NO_LEADER_CHANGE:
        leader, leader_epoch = p.leader, p.leader_epoch
    else:
        leader, leader_epoch = r.leader, p.leader_epoch + 1
    if (r.replicas is None and r.removing_replicas is None and r.adding_replicas is None and r.directories is None
            and r.eligible_leader_replicas is None and r.last_known_elr is None
            and r.leader_recovery_state == _NO_CHANGE):
        return _leader_and_isr(p, r.isr, leader, leader_epoch)
    replicas = p.replicas if r.replicas is None else r.replicas
    return _checked(
        replicas,
        p.isr if r.isr is None else r.isr,
        p.removing_replicas if r.removing_replicas is None else r.removing_replicas,
        p.adding_replicas if r.adding_replicas is None else r.adding_replicas,
        leader,
        p.leader_recovery_state if r.leader_recovery_state == _NO_CHANGE else r.leader_recovery_state,
        leader_epoch,
        p.partition_epoch + 1,
        _directories(p, r, replicas),
        p.eligible_leader_replicas if r.eligible_leader_replicas is None else r.eligible_leader_replicas,
        p.last_known_elr if r.last_known_elr is None else r.last_known_elr,
    )


def _leader_and_isr(p: PartitionRegistration, isr: tuple[int, ...] | None, leader: int,
                    leader_epoch: int) -> PartitionRegistration:
    """`merge` of a change to the ISR and the leader alone, what a broker's fencing and
    unfencing write (a zonal outage at a million partitions is a million of them): `p`'s
    other fields are valid already, so only the new ISR and leader are checked, as
    `_checked` checks them."""
    replicas = p.replicas
    if isr is None or isr == p.isr:
        isr = p.isr
    else:
        isr = intern_ids(isr)
        if isr is not replicas and (len(set(isr)) != len(isr) or not set(isr) <= set(replicas)):
            raise ValueError(f"ISR {list(isr)} must be distinct replicas of {list(replicas)}")
    if leader != NO_LEADER and leader not in isr:
        raise ValueError(f"leader {leader} is not in the ISR {list(isr)}")
    return with_leader_and_isr(p, isr, leader, leader_epoch)


def with_leader_and_isr(p: PartitionRegistration, isr: tuple[int, ...], leader: int,
                        leader_epoch: int) -> PartitionRegistration:
    """`p` with a new (interned) ISR, leader and leader epoch, and the partition epoch + 1,
    unchecked: for a change known to be valid (merged above, or derived by fencing's rules).
    Built as a tuple, not by `_replace` (a dict and a map per call)."""
    return tuple.__new__(PartitionRegistration, (
        p.replicas, isr, p.removing_replicas, p.adding_replicas, leader, p.leader_recovery_state, leader_epoch,
        p.partition_epoch + 1, p.directories, p.eligible_leader_replicas, p.last_known_elr))


def _checked(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    removing: tuple[int, ...],
    adding: tuple[int, ...],
    leader: int,
    leader_recovery_state: int,
    leader_epoch: int,
    partition_epoch: int,
    directories: tuple[bytes, ...] = (),
    elr: tuple[int, ...] | None = None,
    last_known_elr: tuple[int, ...] | None = None,
) -> PartitionRegistration:
    """A partition with interned id lists, checked (see the module docstring). Directories
    all MIGRATING are no assignment (), as Kafka reads them; empty ELRs are None."""
    replicas, isr = intern_ids(replicas), intern_ids(isr)
    if not replicas or len(set(replicas)) != len(replicas):
        raise ValueError(f"replicas {list(replicas)} must be distinct and not empty")
    if isr is not replicas and (len(set(isr)) != len(isr) or not set(isr) <= set(replicas)):
        raise ValueError(f"ISR {list(isr)} must be distinct replicas of {list(replicas)}")
    if leader != NO_LEADER and leader not in isr:
        raise ValueError(f"leader {leader} is not in the ISR {list(isr)}")
    if directories and all(d == _MIGRATING for d in directories):
        directories = ()
    if directories and len(directories) != len(replicas):
        raise ValueError(f"{len(directories)} directories for {len(replicas)} replicas")
    return PartitionRegistration(
        replicas,
        isr,
        intern_ids(removing) if removing else (),
        intern_ids(adding) if adding else (),
        leader,
        leader_recovery_state,
        leader_epoch,
        partition_epoch,
        intern_ids(directories) if directories else (),
        intern_ids(elr) if elr else None,
        intern_ids(last_known_elr) if last_known_elr else None,
    )


def _directories(p: PartitionRegistration, r: PartitionChangeRecord, replicas: tuple[int, ...]) -> tuple[bytes, ...]:
    """Kafka's merge of directories: the record's if it has them; the partition's otherwise,
    unless the replicas changed in number (then none are assigned: all MIGRATING)."""
    if r.directories is not None:
        return r.directories
    return p.directories if len(p.directories) in (0, len(replicas)) else ()
