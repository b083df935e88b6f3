"""`python -m autotune.worker`: exported launch commands and stored studies name this module."""
from .main import main

main()
