"""``python -m fastpubsub`` is the ``pubsub`` command."""

from fastpubsub.cli import main

main(prog_name="pubsub")
