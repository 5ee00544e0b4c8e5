"""``python -m solver`` works like ``hetsched``."""

from solver.cli import main

if __name__ == "__main__":
    main()
