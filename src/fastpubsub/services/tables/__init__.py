"""The table service: aggregate subscriptions over tables (``pubsub tables``)."""
