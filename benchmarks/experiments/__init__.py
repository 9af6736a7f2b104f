"""One-off A/B studies: another source tree's or another kernel version's code timed beside this tree's."""
