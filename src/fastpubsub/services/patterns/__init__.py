"""The pattern service: pattern subscriptions over the events topic (``pubsub patterns``)."""
