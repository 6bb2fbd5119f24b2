"""`kraft.java_order` against Java's own HashMap: the order in which the rows Kafka's tools
print from a HashMap come out (ConsumerGroupCommand's partitions and groups)."""

import random
import shutil
import string
import subprocess
from pathlib import Path

from kraft.java_order import hash_map_order, string_hash, topic_partition_hash

SOURCE = Path(__file__).with_name("JavaHashMapOrder.java")


def test_the_order_is_javas_for_strings_and_topic_partitions(tmp_path):
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac and java, "a JDK is needed (Spark's Java, with its compiler)"
    subprocess.run([javac, "-d", str(tmp_path), str(SOURCE)], check=True, timeout=120)
    rng = random.Random(29)
    maps = []
    for size in (1, 3, 12, 13, 25, 100):  # across the resizes at 12, 24 and 48 keys
        words = ["".join(rng.choices(string.ascii_letters + "-_.", k=rng.randint(1, 20))) for _ in range(size)]
        maps.append(("s", words))
        topics = ["__cluster_metadata", "orders", *words[:3]]
        maps.append(("tp", [(rng.choice(topics), rng.randint(0, 200)) for _ in range(size)]))
    stdin = "".join("".join(f"s {k}\n" if kind == "s" else f"tp {k[0]} {k[1]}\n" for k in keys) + "\n"
                    for kind, keys in maps)
    out = subprocess.run([java, "-cp", str(tmp_path), "JavaHashMapOrder"], input=stdin, capture_output=True,
                         text=True, check=True, timeout=120).stdout.splitlines()
    for (kind, keys), line in zip(maps, out, strict=True):
        if kind == "s":
            assert hash_map_order(keys, string_hash) == line.split("\t")
        else:
            ours = [f"{t}:{p}" for t, p in hash_map_order(keys, topic_partition_hash)]
            assert ours == line.split("\t")
