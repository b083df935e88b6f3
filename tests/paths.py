"""Where things are, for tests in any folder under tests/ (the suite's conftest puts tests/ on
sys.path, so `from paths import REPO` and the shared helpers here import from every folder)."""
from pathlib import Path

TESTS = Path(__file__).resolve().parent      # tests/: shared helpers, fixtures/, fault_site/
REPO = TESTS.parent                          # the checkout
MACHINES = TESTS / "fixtures" / "machines"   # captured /sys and /proc trees of real machines
