"""Issue 46, items 8 and 9: the free-text knob has a grammar and the numeric knobs have bounds,
checked in Config itself, so a value a study stores is refused wherever it is read (`--set`, a
space file, a manifest, a stored recommendation), in one line naming the knob and the value."""
from __future__ import annotations

import re

import pytest

from autotune.config import KNOB_TABLE, Config, parse_sets
from autotune.errors import ConfigError
from autotune.config.limits import MAX_CPUS, MAX_GLOBAL_BATCH

# Intel OpenMP's own examples (KMP_AFFINITY in the oneAPI documentation)
INTEL = ["granularity=fine,compact,1,0", "compact", "scatter", "none", "disabled",
         "verbose,granularity=core,compact", "granularity=fine,proclist=[3,0,1,2],explicit",
         "noverbose,nowarnings,respect,granularity=thread,balanced",
         "proclist=[0-3,8-11:2],explicit", "compact,1"]
SHELL = ["x;touch${IFS}/tmp/owned", "compact;id", "compact|id", "compact&id", "$(id)", "`id`",
         "compact,'1'", 'compact,"1"', "compact 1", "compact\nid", "a{1,2}", "compact>x",
         "granularity=$HOME", "", "proclist=[0;1],explicit", "compact,\\x1b"]


@pytest.mark.parametrize("value", INTEL)
def test_kmp_affinity_takes_intel_openmps_grammar(value):
    assert Config(kmp_affinity=value).kmp_affinity == value


@pytest.mark.parametrize("value", SHELL)
def test_kmp_affinity_refuses_what_a_shell_would_act_on(value):
    with pytest.raises(ConfigError) as info:
        Config(kmp_affinity=value)
    message = str(info.value)
    assert message.startswith(f"kmp_affinity={value!r}: not Intel OpenMP's KMP_AFFINITY syntax")
    assert "\n" not in message


def test_a_stored_configuration_with_a_shell_kmp_affinity_is_refused_where_it_is_read():
    stored = {**Config().to_dict(), "kmp_affinity": "x;touch${IFS}/tmp/owned"}
    with pytest.raises(ConfigError, match=r"^kmp_affinity='x;touch\$\{IFS\}/tmp/owned': not Intel"):
        Config.from_dict(stored, where="stored recommendation")
    with pytest.raises(ConfigError, match="kmp_affinity="):
        parse_sets(["kmp_affinity=compact;id"])


def test_every_free_text_knob_has_a_grammar():
    """A str knob without choices is free text: kmp_affinity is the only one, and its grammar is
    checked above. A new one must get a grammar in config/limits.py before this passes."""
    free = [name for name, knob in KNOB_TABLE.items() if knob.kind == "str" and not knob.choices]
    assert free == ["kmp_affinity"]


@pytest.mark.parametrize("knob, value, limit", [
    ("dataloader_workers", 100_000, MAX_CPUS), ("global_batch", 10**9, MAX_GLOBAL_BATCH),
    ("batch_size", 10**9, MAX_GLOBAL_BATCH), ("threads", 10**6, MAX_CPUS),
    ("nproc", 10**7, 1 << 16), ("nnodes", 10**7, 1 << 16), ("kmp_blocktime", 2**31, 2**31 - 1),
    ("ccl_workers", 5, 4)])
def test_numbers_no_machine_holds_are_refused(knob, value, limit):
    with pytest.raises(ConfigError) as info:
        Config(**{knob: value})
    assert str(info.value).startswith(f"{knob}={value}: more than {limit:,} (")
    assert "give a smaller value" in str(info.value)


def test_the_bounds_keep_what_real_launches_use():
    Config(nproc=4096, nnodes=512, threads=256, dataloader_workers=64, global_batch=65536,
           batch_size=512, kmp_blocktime=200, ccl_workers=4)
    Config(threads=None, batch_size=None, ranks_per_numa_node=None)


@pytest.mark.parametrize("knob, value, words", [
    ("nproc", 0, "must be a positive integer"), ("threads", 0, "must be a positive integer"),
    ("dataloader_workers", -1, "must be an integer >= 0"),
    ("ccl_workers", 0, "must be an integer from 1 to 4"),
    ("kmp_blocktime", -1, "must be an integer >= 0 (ms)"),
    ("global_batch", True, "must be a positive integer")])
def test_the_lower_bounds_say_what_they_said_before(knob, value, words):
    with pytest.raises(ConfigError, match=re.escape(f"{knob}={value!r}: {words}")):
        Config(**{knob: value})
