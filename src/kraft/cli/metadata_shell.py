"""`kraft metadata-shell`: browse a metadata image as Kafka's metadata shell does.

The image is read by `kraft.cli.metadata_files` (a snapshot, or a metadata directory: its
latest snapshot and the log after it) and shown as Kafka's tree (`kraft.cli.metadata_nodes`):
`/image/topics/byName/orders/0`, `/image/cluster/brokers/1`, `/image/configs/TOPIC:orders`,
`/image/acls/<id>`, ... with `/local` beside it.

The commands are Kafka's (shell/.../command/*CommandHandler): ls, cd, cat, tree, find, pwd,
history, help, man, exit, with their output: `ls` sorts and, at a terminal, lays names out
in columns; `tree` and `cat` print through Kafka's ShellNodePrinter layout ("name:" and two
spaces per level); `find` prints paths; `history [N]` numbers entries from 0. Paths take
Kafka's globs (`*`, `?`, `{a,b}`, `\\` to escape). Interactive mode has line editing,
history and tab completion of commands and paths (Python's readline, as Kafka's has
JLine's). kraft departs from Kafka's shell in three ways: errors go to stderr, and a one-shot
command that fails exits 1 (Kafka prints them to stdout and exits 0); one-shot mode (`-c
CMD` or trailing words) accepts every command, several separated by `;`, so `-c "cd /image;
pwd"` works; and `tree` with no path prints the working directory.
"""

import re
import shlex
import shutil
import sys
from collections.abc import Iterator
from typing import TextIO

from kraft.cli.metadata_files import LoadError, load
from kraft.cli.metadata_nodes import Dir, Leaf, Node, root_node, sorted_children
from kraft.cli.output import quiet_on_broken_pipe

PROG = "kraft metadata-shell"
COMMANDS = {  # name: (usage, Kafka's description)
    "cat": ("cat TARGET...", "Show the contents of metadata files."),
    "cd": ("cd [TARGET]", "Set the current working directory."),
    "exit": ("exit", "Exit the metadata shell."),
    "find": ("find [PATH...]", "Search for nodes in the directory hierarchy."),
    "help": ("help", "Display this help message."),
    "history": ("history [N]", "Print command history."),
    "ls": ("ls [TARGET...]", "List metadata nodes."),
    "man": ("man COMMAND", "Show the help text for a specific command."),
    "pwd": ("pwd", "Print the current working directory."),
    "tree": ("tree [TARGET...]", "Show the contents of metadata nodes in a tree structure."),
}
_PATH_COMMANDS = ("cat", "find", "ls", "tree")  # complete every argument as a path
_REGEX_SPECIAL = set("$()+.[]^{|")
_GLOB_SPECIAL = set("*?\\{}")


def glob_pattern(component: str) -> re.Pattern | None:
    """Kafka's GlobComponent: `*`, `?`, `{a,b}` and `\\` escapes as a regular expression; None
    for a literal component (or a malformed glob, which Kafka also takes literally)."""
    out, literal, group, i = [], True, False, 0
    while i < len(component):
        c = component[i]
        i += 1
        if c in "?*":
            literal = False
            out.append("." if c == "?" else ".*")
        elif c == "\\":
            if i < len(component):
                c = component[i]
                i += 1
            out.append(re.escape(c) if c in _REGEX_SPECIAL | _GLOB_SPECIAL else c)
        elif c == "{":
            if group:
                return None  # Kafka cannot nest groups
            literal, group = False, True
            out.append("(?:(?:")
        elif c == "," and group:
            out.append(")|(?:")
        elif c == "}" and group:
            group = False
            out.append("))")
        else:
            out.append(re.escape(c) if c in _REGEX_SPECIAL else c)
    if literal or group:
        return None
    return re.compile("".join(out))


def normalize(path: str) -> list[str]:
    """An absolute path's components, `.` and `..` resolved (`..` stops at the root)."""
    parts: list[str] = []
    for piece in path.split("/"):
        if piece == "..":
            if parts:
                parts.pop()
        elif piece not in ("", "."):
            parts.append(piece)
    return parts


def columns(entries: list[str], width: int | None) -> Iterator[str]:
    """ls's layout (LsCommandHandler.calculateColumnSchema): the most columns, filled top to
    bottom, each two wider than its longest name, that fit the screen; one per line without a
    screen."""
    limit = width or 0
    per, widths = len(entries), []  # entries per column, and each column's width
    for count in range(2, limit // 4 + 1):
        rows = -(-len(entries) // count)
        candidate = [max(len(e) + 2 for e in entries[c * rows : (c + 1) * rows]) for c in range(count)
                     if c * rows < len(entries)]
        if len(candidate) == count and sum(candidate) <= limit:
            per, widths = rows, candidate
    for line in range(per):
        row = entries[line::per]
        yield "".join(e.ljust(widths[c]) if c < len(row) - 1 else e for c, e in enumerate(row))


class Shell:
    """The commands over one image tree; `interactive` when a person types them."""

    def __init__(self, root: Dir, out: TextIO | None = None, interactive: bool = False) -> None:
        self.root = root
        self.out = out or sys.stdout
        self.interactive = interactive
        self.cwd: list[str] = []
        self.history: list[str] = []
        self.done = False
        self._matches: list[str] = []

    # -------------------------------------------------------------------------- running

    def _print(self, line: str) -> None:
        print(line, file=self.out)

    def run(self, line: str) -> bool:
        """Runs a line (commands separated by `;`); False if any failed (said on stderr)."""
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return False
        ok, words = True, []
        for token in [*tokens, ";"]:
            if set(token) != {";"}:
                words.append(token)
                continue
            if words and not self.done:
                ok = self._run_command(words[0], words[1:]) and ok
            words = []
        return ok

    def _run_command(self, command: str, args: list[str]) -> bool:
        """Runs one command: its handler prints what it shows and yields what went wrong."""
        handler = getattr(self, f"_cmd_{command}", None) if command in COMMANDS else None
        if handler is None:
            print(f"error: unknown command {command!r}; try help", file=sys.stderr)
            return False
        errors = list(handler(args) or ())
        for error in errors:
            print(error, file=sys.stderr)
        return not errors

    def visit(self, target: str) -> list[tuple[list[str], Node]]:
        """Every node `target` names (GlobVisitor): its path and the node, in sorted order."""
        full = target if target.startswith("/") else "/".join(["", *self.cwd, target])
        components = normalize(full)
        found: list[tuple[list[str], Node]] = []

        def walk(depth: int, node: Node, path: list[str]) -> None:
            if depth == len(components):
                found.append((path, node))
                return
            if not isinstance(node, Dir):
                return
            pattern = glob_pattern(components[depth])
            if pattern is None:
                child = node.child(components[depth])
                if child is not None:
                    walk(depth + 1, child, [*path, components[depth]])
                return
            for name, child in sorted_children(node):
                if pattern.fullmatch(name):
                    walk(depth + 1, child, [*path, name])

        walk(0, self.root, [])
        return found

    # -------------------------------------------------------------------------- commands

    def _cmd_ls(self, args: list[str]) -> Iterator[str]:
        files: list[str] = []
        directories: list[tuple[str, list[str]]] = []
        for target in args or ["."]:
            found = self.visit(target)
            if not found:
                yield f"ls: {target}: no such file or directory."
            for path, node in found:
                name = path[-1] if path else "/"
                if isinstance(node, Dir):
                    directories.append((name, sorted(node.names())))
                else:
                    files.append(name)
        width = shutil.get_terminal_size().columns if self.interactive and self.out.isatty() else None
        if files:
            for line in columns(files, width):
                self._print(line)
        first = not files
        for name, children in directories:
            intro = ""
            if files or len(directories) > 1:
                intro = ("" if first else "\n") + f"{name}:"
                first = False
            if children:
                if intro:
                    self._print(intro)
                for line in columns(children, width):
                    self._print(line)

    def _cmd_cat(self, args: list[str]) -> Iterator[str]:
        if not args:
            yield "cat: which file? (cat TARGET...)"
        for target in args:
            found = self.visit(target)
            if not found:
                yield f"cat: {target}: No such file or directory."
            for _, node in found:
                if isinstance(node, Dir):
                    yield f"cat: {target}: Is a directory"
                else:
                    self._print(node.text)

    def _tree_lines(self, node: Node, indent: str) -> Iterator[str]:
        """A node as ShellNodePrinter prints it: a file's text, or each child by name, sorted,
        with its contents two spaces further in."""
        if isinstance(node, Leaf):
            yield indent + node.text
            return
        for name, child in sorted_children(node):
            yield f"{indent}{name}:"
            yield from self._tree_lines(child, indent + "  ")

    def _cmd_tree(self, args: list[str]) -> Iterator[str]:
        for target in args or ["."]:
            found = self.visit(target)
            if not found:
                yield f"tree: {target}: No such file or directory."
            for _, node in found:
                for line in self._tree_lines(node, ""):
                    self._print(line)

    def _find_lines(self, path: str, node: Node) -> Iterator[str]:
        yield path
        if isinstance(node, Dir):
            for name, child in sorted_children(node):
                yield from self._find_lines(f"{path}{name}" if path.endswith("/") else f"{path}/{name}", child)

    def _cmd_find(self, args: list[str]) -> Iterator[str]:
        for target in args or ["."]:
            found = self.visit(target)
            if not found:
                yield f"find: {target}: no such file or directory."
            is_glob = any(glob_pattern(part) for part in target.split("/"))
            for path, node in found:  # paths start as typed, as Kafka's do; a glob's at each match
                for line in self._find_lines("/" + "/".join(path) if is_glob else target, node):
                    self._print(line)

    def _cmd_cd(self, args: list[str]) -> Iterator[str]:
        target = args[0] if args else "/"
        found = self.visit(target)
        if not found:
            yield f"cd: {target}: no such directory."
        for path, node in found:
            if isinstance(node, Dir):
                self.cwd = path
            else:
                yield f"cd: {target}: not a directory."

    def _cmd_pwd(self, args: list[str]) -> None:
        self._print("/" + "/".join(self.cwd))

    def _cmd_history(self, args: list[str]) -> Iterator[str]:
        if not self.interactive:
            yield "history: the history command requires a shell."
            return
        if args and not re.fullmatch(r"-?\d+", args[0]):
            yield f"history: {args[0]}: not a number"
            return
        count = max(int(args[0]), 0) if args else len(self.history)
        for number, line in list(enumerate(self.history))[len(self.history) - count :]:
            self._print(f"{number:5d}  {line}")

    def _cmd_help(self, args: list[str]) -> None:
        self._print("Welcome to the kraft metadata shell: a metadata image in the layout of Kafka's.\n")
        for usage, description in COMMANDS.values():
            self._print(f"  {usage:<18} {description}")

    def _cmd_man(self, args: list[str]) -> Iterator[str]:
        if len(args) != 1 or args[0] not in COMMANDS:
            yield f"man: unknown command {' '.join(args)}. Type help to get a list of commands."
            return
        usage, description = COMMANDS[args[0]]
        self._print(f"{args[0]}: {description}\n\nusage: {usage}")

    def _cmd_exit(self, args: list[str]) -> None:
        self.done = True

    # -------------------------------------------------------------------------- interactive

    def complete(self, line: str) -> list[str]:
        """What tab offers for the word being typed at the end of `line` (MetadataShellCompleter):
        command names first, then paths for commands that take them. Each candidate replaces
        the whole word; a directory ends in `/` so completion can go on into it, anything else
        in a space."""
        words = line.split()
        if not words or line[-1].isspace():
            words.append("")
        if len(words) == 1 or (words[0] == "man" and len(words) == 2):
            return [f"{name} " for name in COMMANDS if name.startswith(words[-1])]
        if words[0] in _PATH_COMMANDS or (words[0] == "cd" and len(words) == 2):
            return self._complete_path(words[-1])
        return []

    def _complete_path(self, prefix: str) -> list[str]:
        head, slash, last = prefix.rpartition("/")
        head += slash
        found = self.visit(head or ".")
        if len(found) != 1 or not isinstance(found[0][1], Dir):
            return []
        directory = found[0][1]
        return [
            f"{head}{name}{'/' if isinstance(directory.child(name), Dir) else ' '}"
            for name in sorted(directory.names())
            if name.startswith(last)
        ]

    def _readline_complete(self, text: str, state: int) -> str | None:
        import readline

        if state == 0:
            self._matches = self.complete(readline.get_line_buffer()[: readline.get_endidx()])
        return self._matches[state] if state < len(self._matches) else None

    def _enable_readline(self) -> None:
        """Line editing, history (up arrow) and tab completion; paths complete as whole words."""
        try:
            import readline
        except ImportError:  # a Python built without it: the shell works, without editing
            return
        readline.set_completer_delims(" \t\n")
        readline.set_completer(self._readline_complete)
        libedit = "libedit" in (readline.__doc__ or "")
        readline.parse_and_bind("bind ^I rl_complete" if libedit else "tab: complete")

    def interact(self) -> None:
        self._enable_readline()
        self._print("[ kraft metadata shell ]")
        while not self.done:
            try:
                line = input(">> ")
            except EOFError:
                self._print("")
                return
            except KeyboardInterrupt:
                self._print("^C")
                continue
            if line.strip():
                self.history.append(line)
            self.run(line)


@quiet_on_broken_pipe
def main(snapshot: str | None, directory: str | None, command: str | None, words: list[str]) -> int:
    """Loads the image, then runs one command line and exits (1 if it failed), or reads
    commands until exit or end of input. 2 if the files cannot be read."""
    try:
        loader = load(PROG, snapshot, directory)
    except LoadError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    for line in loader.summary():
        print(f"{PROG}: {line}", file=sys.stderr)
    root = root_node(loader.image, loader.time_ms)
    if command is not None or words:
        return 0 if Shell(root).run(command if command is not None else shlex.join(words)) else 1
    Shell(root, interactive=True).interact()
    return 0
