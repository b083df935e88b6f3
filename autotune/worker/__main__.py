"""`python -m autotune.worker`: exported launch commands and stored studies name this module."""
from .fresh_pid import ensure_fresh_pid

ensure_fresh_pid()     # before torch is imported: a ccl rank must not start on a pid in use
from .main import main  # noqa: E402

main()
