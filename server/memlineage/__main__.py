"""`python -m memlineage` is the `memlineage` command."""

import sys

from memlineage.cli import main

sys.exit(main())
