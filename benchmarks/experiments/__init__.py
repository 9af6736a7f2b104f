"""One-off A/B studies: two versions of one piece of code (another source tree's, another kernel's, a structure on and off) timed side by side."""
