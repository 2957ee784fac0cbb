"""`python -m interlude.cli`."""

import sys

from interlude.cli.main import main

sys.exit(main())
