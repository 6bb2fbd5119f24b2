"""`python -m kraft.cli`: how nodes, the demo and the tools start.

kio registers hypothesis strategies for its protocol types at import whenever hypothesis is
installed (it is, with the dev extras). A node or a tool never uses them, and they cost about
0.4 s of CPU at every start (0.9 s to import a node and the tools with them, 0.5 s without),
paid by each node process and each tool a test runs. So this process refuses that optional
import before anything imports kio."""

import sys

sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]  # None makes `import hypothesis` fail

from kraft.cli.main import main  # noqa: E402  # after the line above, on purpose

sys.exit(main())
