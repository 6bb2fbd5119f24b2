import sys

from kraft.cli.main import main

sys.exit(main())
