"""The test suite's origin servers live in the package (``prefetch.localorigin``),
where ``prefetch demo`` uses them too; this module keeps the tests' import path."""

from prefetch.localorigin import *  # noqa: F401,F403
from prefetch.localorigin import __all__  # noqa: F401
