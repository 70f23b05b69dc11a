"""`python -m sweep.preflight [overrides]`."""

import sys

from sweep.preflight import main

sys.exit(main())
