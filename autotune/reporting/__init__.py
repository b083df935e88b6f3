"""Reporting: what a study found, for people and scripts (`autotune report`): the top
configurations, the Pareto front, the knobs that mattered, the failures and the quality side.
It reads the study and the quality evidence and sits above both; nothing here writes.

Named `reporting`, not `report`: `autotune.report` is the public name scripts written for
earlier versions call (autotune/__init__.py), and importing a subpackage of that name would
rebind it.
"""
