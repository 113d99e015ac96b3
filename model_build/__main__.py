"""`python -m model_build --help`"""

import sys

from model_build.cli import main

sys.exit(main())
