"""The cluster benchmark's headline figures with the controller listener secured (issue 20
item 5): TLS and SASL_SSL against PLAINTEXT, as ratios.

The throughput measurement of cluster_bench.py (3 voters on loopback, 100-byte records, the
load in the leader's process, every record fsynced) run three times, the controller
listener, which carries every Raft RPC between the voters, PLAINTEXT, then SSL with client
certificates required (a CA made for the run by kraft.security.local_ca), then SASL_SSL with
the nodes' PLAIN login as well. The figures are the headline level (1000 in flight) and
saturation (the best level of the search); the ratios are each secured run's against
PLAINTEXT's, measured in the same run. A secured cluster costs encryption of every Fetch
answer in the leader's process (a plaintext one is sent with sendfile) and, once per
connection, a handshake and a login; the target is that the headline stays within 0.8 of
PLAINTEXT's.
"""

import shutil
import sys
import tempfile
from pathlib import Path

from cluster_bench import HEADLINE_IN_FLIGHT, kraft_levels
from common import RESULTS, all_met, goal, print_goals, print_table, write_results

from kraft.security.local_ca import CertificateAuthority

TARGET = 0.8
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def variants(ca: CertificateAuthority) -> dict[str, dict[str, str]]:
    node = ca.issue("node")
    tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(node.keystore),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca.cert),
           "listener.name.controller.ssl.client.auth": "required"}
    return {
        "PLAINTEXT": {},
        "SSL": {**tls, "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT"},
        "SASL_SSL": {**tls, "listener.security.protocol.map": "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT",
                     "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                     "sasl.mechanism.controller.protocol": "PLAIN",
                     "listener.name.controller.plain.sasl.jaas.config":
                         f'{PLAIN_MODULE} required username="node" password="node-pw" user_node="node-pw";'},
    }


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    directory = Path(tempfile.mkdtemp(dir=RESULTS, prefix="security-bench-"))
    try:
        print("Throughput and commit latency as cluster_bench.py measures it, the controller listener "
              "PLAINTEXT, SSL and SASL_SSL", flush=True)
        rows = []
        for name, overrides in variants(CertificateAuthority(directory / "ca")).items():
            rows += kraft_levels(directory / name, overrides, system=name)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    by_system: dict[str, list[dict]] = {}
    for row in rows:
        by_system.setdefault(row["system"], []).append(row)
    base_head = by_system["PLAINTEXT"][0]
    base_best = max(by_system["PLAINTEXT"], key=lambda r: r["ops_s"])
    comparison = []
    for system, measured in by_system.items():
        head, best = measured[0], max(measured, key=lambda r: r["ops_s"])
        comparison.append({
            "listener": system, "headline_ops_s": head["ops_s"], "headline_p99_ms": head["p99_ms"],
            "headline_ratio": head["ops_s"] / base_head["ops_s"], "saturation_ops_s": best["ops_s"],
            "saturation_in_flight": best["in_flight"], "saturation_ratio": best["ops_s"] / base_best["ops_s"]})
    print()
    print_table(rows, ["system", "in_flight", "ops_s", "p50_ms", "p99_ms", "ops"])
    print()
    print_table(comparison, ["listener", "headline_ops_s", "headline_p99_ms", "headline_ratio", "saturation_ops_s",
                             "saturation_in_flight", "saturation_ratio"])
    goals = [goal(f"{c['listener']}: ops/s, {HEADLINE_IN_FLIGHT} in flight", c["headline_ops_s"], "ops/s",
                  goal=f">= {TARGET}x the peer", met=c["headline_ratio"] >= TARGET, peer="PLAINTEXT, same run",
                  peer_value=base_head["ops_s"]) for c in comparison if c["listener"] != "PLAINTEXT"]
    print_goals(goals)
    path = write_results("security", rows, goals, comparison=comparison)
    print(f"results: {path}")
    return 0 if all_met(goals) else 1


if __name__ == "__main__":
    sys.exit(main())
