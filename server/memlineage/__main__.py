"""`python -m memlineage` is the `memlineage` command."""

import sys

try:
    from memlineage.cli import main

    code = main()
except KeyboardInterrupt:  # Ctrl-C while the modules load, before `main` catches it
    code = 130  # as a shell reports a process ended by SIGINT
sys.exit(code)
