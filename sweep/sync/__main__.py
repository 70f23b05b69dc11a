"""`python -m sweep.sync`."""

import sys

from sweep.sync.upload import main

sys.exit(main())
