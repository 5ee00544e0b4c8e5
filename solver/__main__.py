"""``python -m hetsched`` works like ``hetsched``."""

from hetsched.cli.main import main

if __name__ == "__main__":
    main()
