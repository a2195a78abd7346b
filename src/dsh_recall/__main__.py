"""`python -m dsh_recall` runs the CLI (used to start background index jobs)."""

from .frontends.entry import main

if __name__ == "__main__":
    main()
