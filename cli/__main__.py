"""``python -m cli``: the `cosine` program."""

from cli.main import main

main()
