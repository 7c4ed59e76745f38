"""``python -m prefetch``."""

from prefetch.cli import run

if __name__ == "__main__":
    run()
