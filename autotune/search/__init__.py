"""Search: the sampler-driven loop within a budget, the machine lock, and the coordination of a
search shared by several processes through its study."""
