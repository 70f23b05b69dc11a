"""`python -m sweep.services`."""

import sys

from sweep.services.stores import main

sys.exit(main())
