"""Other systems doing the event processor's job, run side by side with it (benchmarks/peers/README.md)."""
