"""A launch configuration (`Config`, config/model.py) and THE knob table (config/table.py), with the
words for knob names and values (config/words.py) and the limits on values (config/limits.py).
Everything is read from here: `from autotune.config import Config, KNOB_TABLE`."""
from .limits import CCL_MAX_WORKERS, MAX_CPUS, MAX_GLOBAL_BATCH, MAX_KMP_BLOCKTIME, MAX_RANKS  # noqa: F401
from .limits import MAX_WINDOW_S  # noqa: F401
from .model import (Config, changed_knobs, describe_changes, launch_part,  # noqa: F401
                    parse_sets)
from .table import *  # noqa: F401,F403
from .table import _AUTO_KNOBS  # noqa: F401
from .words import (KNOB_ALIASES, coerce, did_you_mean, knob_name, renamed_knobs,  # noqa: F401
                    unknown_knob)
