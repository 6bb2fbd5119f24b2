"""The `kraft` command."""

import argparse
import sys
from pathlib import Path


def _dump_log(args: argparse.Namespace) -> int:
    from kraft.cli.dump_log import Options, main

    options = Options(
        deep_iteration=args.deep_iteration,
        print_data_log=args.print_data_log,
        cluster_metadata_decoder=args.cluster_metadata_decoder,
        skip_record_metadata=args.skip_record_metadata,
    )
    return main(args.files, options)


def _metadata_shell(args: argparse.Namespace) -> int:
    from kraft.cli.metadata_shell import main as shell

    return shell(args.snapshot, args.dir, args.shell_command, args.words)


def _demo(args: argparse.Namespace) -> int:
    from kraft.cli.demo import run

    return run(Path(args.dir), args.time_budget, args.secure)


def _chaos(args: argparse.Namespace) -> int:
    from kraft.cli.chaos import run

    return run(Path(args.dir), args.rounds, args.seed)


def _fuzz(args: argparse.Namespace) -> int:
    from kraft.cli.fuzz import run, run_codec

    if args.codec:
        return run_codec(args.inputs, args.seed)
    return run(Path(args.dir), args.inputs, args.seed, args.connections)


def _server(args: argparse.Namespace) -> int:
    from kraft.cli.server_cmd import server_start

    return server_start(args.config)


def _storage(args: argparse.Namespace) -> int:
    from kraft.cli.server_cmd import storage_format, storage_info, storage_random_uuid

    if args.action == "random-uuid":
        return storage_random_uuid()
    if not args.config:
        print(f"kraft storage {args.action}: --config (-c) is required", file=sys.stderr)
        return 2
    if args.action == "info":
        return storage_info(args.config)
    if not args.cluster_id:
        print("kraft storage format: --cluster-id (-t) is required (`kraft storage random-uuid` makes one)",
              file=sys.stderr)
        return 2
    return storage_format(args.config, args.cluster_id, args.ignore_formatted, args.add_scram or [],
                          standalone=args.standalone, initial_controllers=args.initial_controllers,
                          no_initial_controllers=args.no_initial_controllers)


def _cluster(args: argparse.Namespace) -> int:
    from kraft.cli.cluster_cmd import cluster_up

    return cluster_up(args.dir, args.voters, args.observers)


def _metadata_quorum(args: argparse.Namespace) -> int:
    from kraft.cli.quorum_cmd import metadata_quorum

    return metadata_quorum(args.bootstrap_server, args.bootstrap_controller, args.command_config, args.status,
                           args.replication, args.human_readable)


def _add_controller(args: argparse.Namespace) -> int:
    from kraft.cli.quorum_cmd import add_controller

    if args.command_config and args.controller_config and args.command_config != args.controller_config:
        print("kraft metadata-quorum add-controller: --command-config is given twice, with two files: give it once",
              file=sys.stderr)
        return 1
    return add_controller(args.bootstrap_server, args.bootstrap_controller,
                          args.controller_config or args.command_config, args.dry_run)


def _remove_controller(args: argparse.Namespace) -> int:
    from kraft.cli.quorum_cmd import remove_controller

    return remove_controller(args.bootstrap_server, args.bootstrap_controller, args.command_config,
                             args.controller_id, args.controller_directory_id, args.dry_run)


def _restore(args: argparse.Namespace) -> int:
    from kraft.cli.recovery import restore

    return restore(args.config, args.snapshot, args.epoch)


def _recover(args: argparse.Namespace) -> int:
    from kraft.cli.recovery import recover

    return recover(args.config, args.from_dir, args.epoch)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft", description="Kafka's KRaft replicated log in Python.")
    sub = parser.add_subparsers(dest="command", required=True)

    dump = sub.add_parser(
        "dump-log", help="print .log segments, .index files and .checkpoint snapshots (like kafka-dump-log)"
    )
    dump.add_argument("--files", nargs="+", required=True, metavar="FILE[,FILE...]",
                      help="files to dump: comma-separated as Kafka takes them, or several arguments")
    dump.add_argument("--print-data-log", "--print-records", action="store_true",
                      help="print each record's key and payload (implies --deep-iteration)")
    dump.add_argument("--deep-iteration", action="store_true", help="print every record, not only batches")
    dump.add_argument("--cluster-metadata-decoder", action="store_true",
                      help="print payloads as metadata records, one line of Kafka's JSON each (implies --print-data-log)")
    dump.add_argument("--skip-record-metadata", action="store_true",
                      help="leave out each record's offset, sizes and headers, and control records")
    dump.set_defaults(func=_dump_log)

    shell = sub.add_parser("metadata-shell", help="browse the metadata image in a snapshot, or a snapshot and the log")
    source = shell.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="a .checkpoint file")
    source.add_argument("--dir", metavar="PARTITION_DIR",
                        help="its latest .checkpoint, then the .log segments after it (or a metadata.log.dir)")
    shell.add_argument("-c", dest="shell_command", metavar="COMMAND",
                       help="run this command line (commands separated by ;) and exit (else: interactive)")
    shell.add_argument("words", nargs="*", metavar="COMMAND", help="a command to run and exit, e.g. ls /image/topics")
    shell.set_defaults(func=_metadata_shell)

    server = sub.add_parser("server", help="run a node")
    server_sub = server.add_subparsers(dest="action", required=True)
    start = server_sub.add_parser("start", help="start a node from its server.properties")
    start.add_argument("config", help="path to server.properties")
    start.set_defaults(func=_server)

    storage = sub.add_parser("storage", help="format a node's metadata.log.dir, or show it (like kafka-storage)")
    storage.add_argument("action", choices=["format", "info", "random-uuid"])
    storage.add_argument("--config", "-c", help="path to server.properties")
    storage.add_argument("--cluster-id", "-t", help="the cluster id (kraft storage random-uuid makes one)")
    storage.add_argument("--ignore-formatted", "-g", action="store_true",
                         help="skip a directory already formatted for this cluster and node, rather than fail")
    storage.add_argument("--add-scram", "-S", action="append", metavar="SCRAM_CREDENTIAL",
                         help="a SCRAM credential for the new log, as Kafka's: "
                              "'SCRAM-SHA-256=[name=alice,password=alice-secret]' (repeatable); "
                              "password-file=PATH takes the password from a file's first line, "
                              "password-file=- from a line of standard input")
    # Mutually exclusive, as Kafka's; checked by the command, which says so in one line.
    storage.add_argument("--standalone", "-s", action="store_true",
                         help="format this controller as the only voter of a new dynamic quorum (KIP-853)")
    storage.add_argument("--initial-controllers", "-I", metavar="ID@HOST:PORT:DIRECTORY_ID,...",
                         help="the first voters of a new dynamic quorum, the same on every node "
                              "(`kraft storage random-uuid` makes directory ids)")
    storage.add_argument("--no-initial-controllers", "-N", action="store_true",
                         help="a controller without controller.quorum.voters that joins a dynamic quorum later")
    storage.set_defaults(func=_storage)

    cluster = sub.add_parser("cluster", help="a local cluster of processes on loopback; the cluster's id; "
                                             "unregister a broker (like kafka-cluster)")
    cluster_sub = cluster.add_subparsers(dest="action", required=True)
    up = cluster_sub.add_parser("up", help="start it, show where everything is, stop on Ctrl-C")
    up.add_argument("--voters", type=int, default=3)
    up.add_argument("--observers", type=int, default=1)
    up.add_argument("--dir", required=True, help="where the nodes keep configs, data and logs")
    up.set_defaults(func=_cluster)
    from kraft.cli import cluster_tool

    cluster_tool.add_parsers(cluster_sub)

    quorum = sub.add_parser("metadata-quorum", help="describe the quorum (like kafka-metadata-quorum)")
    connect = quorum.add_mutually_exclusive_group(required=True)
    connect.add_argument("--bootstrap-server", help="HOST:PORT[,HOST:PORT...] of client listeners")
    connect.add_argument("--bootstrap-controller", help="HOST:PORT[,HOST:PORT...] of controller listeners")
    quorum.add_argument("--command-config", help="admin client properties (security.protocol, client.id, ...); "
                                                  "for add-controller, the new controller's server.properties")
    quorum_sub = quorum.add_subparsers(dest="action", required=True)
    describe = quorum_sub.add_parser("describe")
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--status", action="store_true")
    which.add_argument("--replication", action="store_true")
    describe.add_argument("--human-readable", action="store_true", help="timestamps as 'N ms ago' (--replication)")
    describe.set_defaults(func=_metadata_quorum)
    add = quorum_sub.add_parser("add-controller", help="make a controller a voter (KIP-853's dynamic quorum)")
    add.add_argument("--command-config", dest="controller_config", metavar="FILE",
                     help="the new controller's server.properties (also accepted before the sub-command, as Kafka's)")
    add.add_argument("--dry-run", action="store_true", help="print what would be done, but do not do it")
    add.set_defaults(func=_add_controller)
    remove = quorum_sub.add_parser("remove-controller", help="remove a voter (KIP-853's dynamic quorum)")
    remove.add_argument("--controller-id", "-i", required=True, metavar="ID", help="the id of the controller to remove")
    remove.add_argument("--controller-directory-id", "-d", required=True, metavar="UUID",
                        help="the directory id of the controller to remove (DirectoryId in describe --replication)")
    remove.add_argument("--dry-run", action="store_true", help="print what would be done, but do not do it")
    remove.set_defaults(func=_remove_controller)

    from kraft.cli import acls_cmd, configs_cmd, features_cmd, groups_cmd, topics_cmd

    topics_cmd.add_parser(sub)
    configs_cmd.add_parser(sub)
    acls_cmd.add_parser(sub)
    groups_cmd.add_parser(sub)
    features_cmd.add_parser(sub)

    new_epoch_help = ("the new epoch: the same on every node and above every epoch a client saw "
                      "(required unless this node is the cluster's only voter)")
    restore = sub.add_parser("restore", help="restart a stopped node from a snapshot backup, in a new epoch")
    restore.add_argument("--snapshot", required=True, help="a .checkpoint file (the backup)")
    restore.add_argument("--config", required=True, help="the node's server.properties")
    restore.add_argument("--epoch", type=int, help=new_epoch_help)
    restore.set_defaults(func=_restore)

    recover = sub.add_parser("recover", help="unclean recovery: a stopped node takes a surviving replica's log")
    recover.add_argument("--from", dest="from_dir", required=True, help="the survivor's metadata.log.dir")
    recover.add_argument("--config", required=True, help="the node's server.properties")
    recover.add_argument("--epoch", type=int, help=new_epoch_help)
    recover.set_defaults(func=_recover)

    demo = sub.add_parser("demo", help="show the system doing its work end to end")
    demo.add_argument("--dir", default="demo-data", help="where the demo writes its files")
    demo.add_argument("--time-budget", type=float, default=120, metavar="SECONDS",
                      help="fail if the demo takes longer (0: no limit)")
    demo.add_argument("--secure", action="store_true",
                      help="a secured cluster: TLS, SASL/SCRAM on the client listener, ACLs (make demo SECURE=1)")
    demo.set_defaults(func=_demo)

    chaos = sub.add_parser("chaos", help="a local cluster under random kills, pauses and restarts, checked for lost writes")
    chaos.add_argument("--rounds", type=int, default=20, help="faults to inject, one after another")
    chaos.add_argument("--seed", type=int, default=1, help="chooses the faults, their targets and durations")
    chaos.add_argument("--dir", default="chaos-data", help="where the cluster writes its files (emptied first)")
    chaos.set_defaults(func=_chaos)

    fuzz = sub.add_parser(
        "fuzz", help="hostile requests against a node, checked for crashes, service and memory"
    )
    fuzz.add_argument("--inputs", type=int, default=100_000, help="inputs to send")
    fuzz.add_argument("--seed", type=int, default=1, help="chooses every input")
    fuzz.add_argument(
        "--connections", type=int, default=8, help="senders at once, half on each listener"
    )
    fuzz.add_argument(
        "--dir", default="fuzz-data", help="where the node writes its files (emptied first)"
    )
    fuzz.add_argument(
        "--codec", action="store_true", help="only the decoders, in this process, without a node"
    )
    fuzz.set_defaults(func=_fuzz)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv  # as given, for the tools whose errors repeat it (kraft configs, as kafka-configs)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
