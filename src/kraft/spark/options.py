"""Data source options: Spark hands them over as case-insensitive strings.

Every source names the options it knows; any other is refused with its name, as kraft's
server refuses an unknown config key, so a misspelt option fails the read instead of being
silently ignored.
"""

import os
from collections.abc import Mapping

from pyspark.sql.types import StructType

from kraft.spark.history import HISTORY_SCHEMA
from kraft.spark.rows import record_schema

LATEST = "latest"
# Options both record sources take: "none" (Kafka rows) or "metadata" (history rows); and
# whether Kafka rows have Spark's headers column.
DECODE, INCLUDE_HEADERS = "decode", "includeHeaders"


class Options:
    def __init__(self, source: str, options: Mapping[str, str], known: tuple[str, ...], prefix: str = "") -> None:
        """`prefix`: options whose names start with it are the source's to check (kafka.*)."""
        self.source = source
        self._options = {k.lower(): v for k, v in options.items()}
        names = {k.lower(): k for k in (*known, "path")}
        unknown = sorted(k for k in self._options if k not in names and not (prefix and k.startswith(prefix)))
        if unknown:
            known_names = sorted(names.values()) + ([f"{prefix}*"] if prefix else [])
            raise ValueError(f"{source}: unknown option(s) {unknown}; it knows {known_names}")

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """The options whose (lower case) names start with `prefix`, without it."""
        return {k[len(prefix):]: v for k, v in self._options.items() if k.startswith(prefix)}

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

    def include_headers(self) -> bool:
        """Option `includeHeaders`, "false" (Spark's default) or "true"."""
        return self.boolean(INCLUDE_HEADERS, False)

    def row_schema(self) -> StructType:
        """The rows of a record source: decoded history, or Kafka's (with headers if asked)."""
        return HISTORY_SCHEMA if self.decode() else record_schema(self.include_headers())

    def boolean(self, name: str, default: bool) -> bool:
        return self.choice(name, ("true", "false") if default else ("false", "true")) == "true"

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
