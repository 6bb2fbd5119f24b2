"""Data source options: Spark hands them over as case-insensitive strings.

Every source names the options it knows; any other is refused with its name, as kraft's
server refuses an unknown config key, so a misspelt option fails the read instead of being
silently ignored.
"""

import os
from collections.abc import Mapping

LATEST = "latest"
DECODE = "decode"  # the option both record sources take: "none" (Kafka rows) or "metadata" (history rows)


class Options:
    def __init__(self, source: str, options: Mapping[str, str], known: tuple[str, ...]) -> None:
        self.source = source
        self._options = {k.lower(): v for k, v in options.items()}
        names = {k.lower(): k for k in (*known, "path")}
        unknown = sorted(k for k in self._options if k not in names)
        if unknown:
            raise ValueError(f"{source}: unknown option(s) {unknown}; it knows {sorted(names.values())}")

    def path(self) -> str:
        """The path given to load(), made absolute. Readers are made on the driver and read
        in executors, which on a cluster run in other working directories: a relative path
        is resolved here, against the driver's, as Spark's own file sources resolve theirs."""
        path = self._options.get("path")
        if not path:
            raise ValueError(
                f"{self.source}: no path: load(<metadata.log.dir or partition directory>), such as "
                ".../__cluster_metadata-0"
            )
        return os.path.abspath(path)

    def decode(self) -> bool:
        """Whether rows are decoded metadata records (`kraft.spark.history`) rather than
        Kafka's rows: option `decode`, "none" (the default) or "metadata"."""
        return self.choice(DECODE, ("none", "metadata")) == "metadata"

    def get(self, name: str, default: str) -> str:
        return self._options.get(name.lower(), default)

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        """One of `choices` (the first is the default), compared case-insensitively."""
        value = self.get(name, choices[0]).strip().lower()
        if value not in choices:
            raise ValueError(f"{self.source}: option {name} is {value!r}; expected one of {list(choices)}")
        return value

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        raw = self.get(name, str(default))
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{self.source}: option {name} is {raw!r}, not an integer") from None
        if value < minimum:
            raise ValueError(f"{self.source}: option {name} is {value}; it must be at least {minimum}")
        return value

    def ending_offset(self) -> int | None:
        """`endingOffsets`: "latest" (the log's end, the default) or an offset (exclusive)."""
        raw = self.get("endingOffsets", LATEST).strip()
        if raw.lower() == LATEST:
            return None
        try:
            return int(raw)
        except ValueError:
            raise ValueError(
                f"{self.source}: option endingOffsets is {raw!r}; expected {LATEST!r} or an offset"
            ) from None
