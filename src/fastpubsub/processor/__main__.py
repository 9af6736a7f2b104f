"""``python -m fastpubsub.processor`` is the ``pubsub`` command."""

from .cli import main

main(prog_name="pubsub")
