"""The ``hil`` console script (and ``python -m hil``): needs the hil extra."""

from shared.extras import load_main


def main() -> None:
    """Run ``hil``, or say in one line that this install lacks the hil extra."""
    load_main("hil", "hil", "hil.cli")()


if __name__ == "__main__":
    main()
