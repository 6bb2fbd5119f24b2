"""`kraft cluster cluster-id` and `kraft cluster unregister`, Kafka's kafka-cluster (ClusterTool).

    cluster-id  (--bootstrap-server | --bootstrap-controller) HOST:PORT [--config FILE]
    unregister  (--bootstrap-server | --bootstrap-controller) HOST:PORT [--config FILE] --id N

`cluster-id` prints `Cluster ID: <id>` (DescribeCluster); `unregister` removes a broker's
registration (UnregisterBroker, ALTER on the cluster), which a broker that is still running
makes again at its next heartbeat: it is for brokers gone for good. Errors are one line on
stderr, Kafka's exception as ClusterTool prints it, exit 1.
"""

import argparse
import sys
from typing import Any

from kraft.cli.admin_client import Admin, bootstrap_of, run_tool
from kraft.cli.admin_connection import ToolError, read_command_config
from kraft.cli.kafka_errors import KafkaError, check

UNREGISTER_BROKER = 64


def add_parsers(cluster_sub: Any) -> None:
    """The two sub-commands beside `kraft cluster up`."""
    for name, text in (("cluster-id", "Get information about the ID of a cluster."),
                       ("unregister", "Unregister a broker.")):
        p = cluster_sub.add_parser(name, help=text)
        connect = p.add_mutually_exclusive_group(required=True)
        connect.add_argument("--bootstrap-server", "-b", help="A list of host/port pairs to use for establishing the "
                                                              "connection to the Kafka cluster.")
        connect.add_argument("--bootstrap-controller", "-C", help="A list of host/port pairs to use for establishing "
                                                                  "the connection to the KRaft controllers.")
        p.add_argument("--config", "-c", help="A property file containing configurations for the Admin client.")
        if name == "unregister":
            p.add_argument("--id", "-i", type=int, required=True, help="The ID of the broker to unregister.")
        p.set_defaults(func=main)


async def _run(args: argparse.Namespace) -> None:
    bootstrap, endpoint_type = bootstrap_of(args.bootstrap_server, args.bootstrap_controller)
    settings = read_command_config(args.config, flag="--config")
    async with Admin(bootstrap, settings, endpoint_type) as admin:
        if args.action == "cluster-id":
            cluster_id = (await admin.describe_cluster()).cluster_id
            print(f"Cluster ID: {cluster_id}" if cluster_id else
                  "No cluster ID found. The Kafka version is probably too old.")
            return
        if admin.first.highest(UNREGISTER_BROKER, range(0, 1)) is None:
            print("The target cluster does not support the broker unregistration API.")
            return
        answer = await admin.call(UNREGISTER_BROKER, range(0, 1), {"broker_id": args.id})
        check(answer.error_code, answer.error_message)
        print(f"Broker {args.id} is no longer registered.")


def _failed(e: KafkaError | ToolError) -> None:
    """ClusterTool prints the exception's message: for an error the cluster answered, the
    ExecutionException's, which is its cause as Java prints it."""
    print(e.java() if isinstance(e, KafkaError) else e, file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    return run_tool(args, lambda _: None, _run, _failed)
