"""What the benchmarks share, not benchmarks of their own: result files, CPU and memory meters, timing, broker I/O."""
