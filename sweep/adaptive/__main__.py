"""`python -m sweep.adaptive`."""

import sys

from sweep.adaptive.cli import main

sys.exit(main())
