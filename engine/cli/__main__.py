"""`python -m engine.cli`: the `memwb` command."""
import sys

from engine.cli import main

sys.exit(main())
