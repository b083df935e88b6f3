"""A configuration as people read it: the knobs that differ from the default launch, rendered by
one function (config.describe_changes) for progress lines, reports, exports and notes."""
from __future__ import annotations

from autotune.display.progress import short
from autotune.config import Config, changed_knobs, describe_changes
from autotune.reporting.format import _knobs


def test_only_the_knobs_that_differ_in_knob_order():
    c = Config(precision="bf16", nproc=2, global_batch=64)
    assert changed_knobs(c) == {"nproc": 2, "global_batch": 64, "precision": "bf16"}
    assert describe_changes(c) == "nproc=2 global_batch=64 precision=bf16"
    assert changed_knobs(Config()) == {}
    assert describe_changes(Config()) == "the default launch"
    assert describe_changes(Config(), none="default") == "default"


def test_a_stored_mapping_keeps_its_order_and_drops_knobs_this_version_lacks():
    stored = {**Config().to_dict(), "precision": "bf16", "retired_knob": 3, "allocator": "tcmalloc"}
    assert changed_knobs(stored) == {"allocator": "tcmalloc", "precision": "bf16"}
    assert describe_changes(changed_knobs(stored)) == describe_changes(stored)


def test_progress_and_report_render_through_it_with_their_own_words_for_none():
    c = Config(allocator="jemalloc")
    assert short(c) == _knobs(changed_knobs(c)) == describe_changes(c) == "allocator=jemalloc"
    assert short(Config()) == "default launch"
    assert _knobs({}) == "(the default launch)"


def test_oneccls_knobs_show_only_with_the_ccl_backend():
    # the search samples them with gloo too; there they mean nothing (placement.canonical agrees)
    sampled = Config(nproc=2, ccl_workers=2, ccl_worker_affinity="dedicated")
    assert describe_changes(sampled) == "nproc=2"
    used = Config(nproc=2, backend="ccl", ccl_workers=2)
    assert describe_changes(used) == "nproc=2 backend=ccl ccl_workers=2"
    assert describe_changes(changed_knobs(used)) == describe_changes(used)


def test_the_knob_once_called_nproc_per_node_is_read_by_its_old_name_everywhere(tmp_path):
    """Issue 35, item 5: `nproc_per_node` meant ranks per NUMA node, which a torchrun user reads
    as ranks per host; it is now `ranks_per_numa_node`. Stored studies, manifests, space files
    and `--set` written with the old name still read, and Config.key() keeps the old spelling so
    keys stored before the rename name the same launch."""
    from autotune.config import Config, changed_knobs, parse_sets
    from autotune.space.spec import parse_space
    new = Config(nproc=2, ranks_per_numa_node=2)
    assert Config.from_dict({"nproc": 2, "nproc_per_node": 2}) == new          # study, manifest
    assert parse_sets(["nproc=2", "nproc_per_node=2"]) == new                   # --set
    assert changed_knobs({"nproc": 2, "nproc_per_node": 2}) == {"nproc": 2,
                                                                "ranks_per_numa_node": 2}
    assert "nproc_per_node=2" in new.key() and "ranks_per_numa_node" not in new.key()
    assert "ranks_per_numa_node" in new.to_dict() and "nproc_per_node" not in new.to_dict()
    spec = parse_space("name: old\nknobs:\n  nproc_per_node: [1, 2]\n"
                       "constraints: ['nproc_per_node <= 2']\n", source="old.yaml")
    assert list(spec.knobs) == ["ranks_per_numa_node"]
    assert spec.constraints[0].names == frozenset({"ranks_per_numa_node"})
