"""Example user workloads: an entry point (entry.py:build), a plain DDP script (plain_ddp.py) and
a small GPT whose launch takes ~15 s before its first step (slow_start_gpt.py, issue 62)."""
