"""The ``home`` console script (and ``python -m home``): needs the home extra."""

from shared.extras import load_main


def main() -> None:
    """Run ``home``, or say in one line that this install lacks the home extra."""
    load_main("home", "home", "home.cli")()


if __name__ == "__main__":
    main()
