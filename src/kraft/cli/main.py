"""The `kraft` command."""

import argparse
import sys
from pathlib import Path


def _dump_log(args: argparse.Namespace) -> int:
    from kraft.cli.dump_log import dump_index, dump_segment, dump_snapshot

    status = 0
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            print(f"kraft dump-log: {path}: no such file", file=sys.stderr)
            status = 2
            continue
        if path.suffix == ".log":
            lines = dump_segment(path, print_records=args.print_records)
        elif path.suffix == ".index":
            lines = dump_index(path)
        elif path.suffix == ".checkpoint":
            lines = dump_snapshot(path, print_records=args.print_records)
        else:
            print(
                f"kraft dump-log: {path}: not a .log segment, .index or .checkpoint snapshot", file=sys.stderr
            )
            status = 2
            continue
        for line in lines:
            print(line)
    return status


def _metadata_shell(args: argparse.Namespace) -> int:
    from kraft.cli.metadata_shell import main as shell

    return shell(args.snapshot, args.dir, args.shell_command, args.words)


def _demo(args: argparse.Namespace) -> int:
    from kraft.cli.demo import run

    return run(Path(args.dir))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft", description="Kafka's KRaft replicated log in Python.")
    sub = parser.add_subparsers(dest="command", required=True)

    dump = sub.add_parser(
        "dump-log", help="print .log segments, .index files and .checkpoint snapshots (like kafka-dump-log)"
    )
    dump.add_argument("--files", nargs="+", required=True, metavar="PATH", help="files to dump")
    dump.add_argument("--print-records", action="store_true", help="print every record, not only batches")
    dump.set_defaults(func=_dump_log)

    shell = sub.add_parser("metadata-shell", help="browse the metadata image in a snapshot, or a snapshot and the log")
    source = shell.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="a .checkpoint file")
    source.add_argument("--dir", metavar="PARTITION_DIR", help="its latest .checkpoint, then the .log segments after it")
    shell.add_argument("-c", dest="shell_command", metavar="COMMAND", help="run this command and exit (else: interactive)")
    shell.add_argument("words", nargs="*", metavar="COMMAND", help="a command to run and exit, e.g. ls /topics")
    shell.set_defaults(func=_metadata_shell)

    demo = sub.add_parser("demo", help="show the system doing its work end to end")
    demo.add_argument("--dir", default="demo-data", help="where the demo writes its files")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
