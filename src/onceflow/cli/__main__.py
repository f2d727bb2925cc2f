"""`python -m onceflow.cli ...`: the same as the `onceflow` command."""

import sys

from onceflow.cli.app import main

sys.exit(main())
