"""The README's chart of the decoded history, run as written against a log built here."""

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from kraft.metadata import operations as ctl
from kraft.metadata.records import NO_LEADER_CHANGE, PartitionChangeRecord, PartitionRecord
from tests.spark.logs import T0, TOPIC, MetadataLog

README = Path(__file__).parents[2] / "README.md"
MINUTE = 60_000


def readme_chart() -> str:
    (chart,) = [b for b in re.findall(r"```python\n(.*?)```", README.read_text(), re.S) if "leader-changes.png" in b]
    return chart


def leader_log(root: Path) -> Counter:
    """A metadata.log.dir whose partition leaders move as brokers are fenced and unfenced
    through the controller, a minute apart; and, from the records committed, how many
    partitions moved their leadership to each broker in each minute."""
    m = MetadataLog(root / f"{TOPIC}-0")
    leaders: dict[tuple[bytes, int], int] = {}
    moved: Counter = Counter()

    def commit(result, minute: int) -> None:
        m.timestamp = T0 + minute * MINUTE
        for r in result.records:
            if isinstance(r, PartitionRecord | PartitionChangeRecord) and r.leader != NO_LEADER_CHANGE:
                before = leaders.get((r.topic_id, r.partition_id))
                if before is not None and r.leader >= 0 and r.leader != before:
                    moved[(m.timestamp // MINUTE * MINUTE, r.leader)] += 1
                leaders[(r.topic_id, r.partition_id)] = r.leader
        m.commit(result)

    m.leader_change()
    m.add_brokers(1, 2, 3, 4)
    for minute, event, what in [(0, "create", "orders"), (0, "create", "payments"), (2, "fence", 2),
                                (4, "unfence", 2), (5, "create", "refunds"), (6, "fence", 3), (8, "unfence", 3),
                                (8, "create", "audit"), (9, "fence", 1), (11, "fence", 4)]:
        if event == "create":
            commit(ctl.create_topic(m.image, ctl.NewTopic(what, 12, 3, {}), m.rng), minute)
        elif event == "fence":
            commit(ctl.fence_broker(m.image, what), minute)
        else:
            commit(ctl.unfence_broker(m.image, what, m.image.broker(what).epoch), minute)
    m.close()
    return moved


def test_the_readme_charts_leader_changes_per_broker_from_the_history(tmp_path):
    """The block runs in a fresh Python whose working directory holds `metadata`, as the
    README says (its relative path is resolved on the driver); its data is then printed."""
    expected = leader_log(tmp_path / "metadata")
    dump = "\nimport json\nprint('CHANGES=' + json.dumps([[r.minute.timestamp(), r.leader, r['count']] for r in changes]))\n"
    out = subprocess.run([sys.executable, "-c", readme_chart() + dump], cwd=tmp_path, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    (line,) = [line for line in out.stdout.splitlines() if line.startswith("CHANGES=")]
    got = {(round(seconds * 1000), leader): n for seconds, leader, n in json.loads(line.removeprefix("CHANGES="))}
    assert got == dict(expected)
    assert len({leader for _, leader in got}) == 4 and len({minute for minute, _ in got}) >= 4
    png = tmp_path / "leader-changes.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
