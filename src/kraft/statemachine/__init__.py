"""What every state machine on a Raft log shares: when to snapshot, the snapshot job, the
changed-records count; see docs/architecture.md."""
