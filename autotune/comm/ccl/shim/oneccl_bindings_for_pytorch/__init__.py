"""autotune's stand-in for Intel's `oneccl_bindings_for_pytorch` (oneccl_bind_pt).

Scripts written for Intel's bindings start with `import oneccl_bindings_for_pytorch`, whose
import registers the "ccl" backend. autotune puts this folder on PYTHONPATH for such scripts
(`search --script`, `launch`, exported commands): importing it registers the same backend name,
from Intel's package where that is installed (the torch-2.8 IPEX lane), else from autotune's own
build over the oneCCL runtime. The script itself runs unmodified.
"""
from autotune.comm import ccl as _ccl

provider = _ccl.register()
