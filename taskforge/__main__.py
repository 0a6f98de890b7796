"""``python -m taskforge`` is the ``taskforge`` command."""

from .cli import main

if __name__ == "__main__":
    main()
