"""The event processor: subscriptions x events -> notifications (``pubsub run``)."""
