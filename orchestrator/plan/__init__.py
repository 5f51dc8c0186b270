"""From a `MatrixSpec` to cells and a plan: the grid, each cell's identity, adaptive repeats,
and which cells run now."""
