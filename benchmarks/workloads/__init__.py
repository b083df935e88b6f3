"""Example user workloads: an entry point (entry.py:build) and a plain DDP script (plain_ddp.py)."""
