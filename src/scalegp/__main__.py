"""``python -m scalegp``: the command line."""

import sys

from .cli import main

if __name__ == "__main__":          # importing the module (the API reference's scan) runs nothing
    sys.exit(main())
