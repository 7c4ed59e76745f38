"""``python -m prefetch``."""

from prefetch.cli import main

if __name__ == "__main__":
    main()
