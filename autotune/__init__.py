"""autotune: find the fastest way to launch PyTorch distributed training on this machine."""
__version__ = "0.1.0"

from .config import Config  # noqa: E402
from .client import report  # noqa: E402
from .errors import AutotuneError  # noqa: E402

__all__ = ["AutotuneError", "Config", "__version__", "report"]
