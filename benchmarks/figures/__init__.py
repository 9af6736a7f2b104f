"""Fabret et al.'s figures (SIGMOD 2001, section 6.2) reproduced: Figure 3's sweeps, Figure 4's equilibrium, the paper's values."""
