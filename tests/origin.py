"""The test suite's origin servers live in the package (``prefetch.demo.origin``),
where ``prefetch demo`` uses them too; this module keeps the tests' import path."""

from prefetch.demo.origin import *  # noqa: F401,F403
from prefetch.demo.origin import __all__  # noqa: F401
