"""autotune: find the fastest way to launch PyTorch distributed training on this machine."""
__version__ = "0.1.0"

from .config import Config  # noqa: E402
from .client import report_metrics  # noqa: E402
from .errors import AutotuneError  # noqa: E402

# The name scripts written for earlier versions call (now report_metrics: `autotune report` is
# the command that shows a study).
report = report_metrics

__all__ = ["AutotuneError", "Config", "__version__", "report", "report_metrics"]
