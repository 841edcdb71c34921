"""`python -m sessionstore` runs the CLI."""

import sys

from sessionstore.cli import main

sys.exit(main())
