import sys
import textwrap

import pytest
import torch

from autotune.errors import WorkloadError
from autotune.worker.workloads import (HELD_OUT_START, WORKLOADS, WorkloadSpec, get_workload,
                                held_out_counts, rank_slice, torchvision_names, workload_names)

# Small variants of each builtin: same code paths and data, sized for a unit test.
SMALL = {"cnn": dict(width=8, image_size=16), "transformer": dict(dim=32, seq_len=16, layers=1),
         "mlp": dict(features=64, hidden=64)}


@pytest.fixture
def one_thread():
    # Other processes share this 2-core machine; 2 OpenMP threads contending for it run 20x slower.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_registry_has_builtins():
    assert list(WORKLOADS) == ["cnn", "transformer", "mlp", "wide_mlp"]
    assert workload_names()[:4] == ["cnn", "transformer", "mlp", "wide_mlp"]
    # each name builds the workload of that name (the registry pairs config's names with them)
    assert [get_workload(n).name for n in WORKLOADS] == list(WORKLOADS)


def test_wide_mlp_has_a_gradient_large_next_to_its_compute():
    """21M parameters: 84 MB of fp32 gradient a step, where the backend shows (benchmarks/timed/backends.py)."""
    model = WORKLOADS["wide_mlp"]().build_model(0)
    assert 20e6 < sum(p.numel() for p in model.parameters()) < 22e6


def test_unknown_name_lists_valid_ones():
    with pytest.raises(WorkloadError) as err:
        get_workload("resnet5O")
    msg = str(err.value)
    assert "'resnet5O'" in msg and "cnn, transformer, mlp" in msg and "module:function" in msg


def test_bad_arguments_name_the_workload():
    with pytest.raises(WorkloadError, match="workload 'cnn': bad workload arguments"):
        get_workload("cnn", {"no_such_arg": 1})


@pytest.mark.parametrize("name", list(SMALL))
def test_batches_are_deterministic_and_split_invariant(name):
    spec = get_workload(name, SMALL[name])
    x1, y1 = spec.make_batch(100, 8, 0)
    x2, y2 = spec.make_batch(100, 8, 0)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    # Sample i is the same whichever batch it is drawn in: data depends on the global batch only.
    xa, ya = spec.make_batch(100, 3, 0)
    xb, yb = spec.make_batch(103, 5, 0)
    assert torch.equal(torch.cat([xa, xb]), x1) and torch.equal(torch.cat([ya, yb]), y1)
    assert not torch.equal(spec.make_batch(100, 8, 1)[0], x1)          # another seed
    assert y1.dtype == torch.long and int(y1.max()) < spec.num_classes


def test_ranks_get_disjoint_samples():
    assert rank_slice(0, 0, 32, 2) == (0, 32)
    assert rank_slice(0, 1, 32, 2) == (32, 32)
    assert rank_slice(3, 1, 16, 4) == (3 * 64 + 16, 16)
    spec = get_workload("mlp", SMALL["mlp"])
    assert not torch.equal(spec.make_batch(*rank_slice(0, 0, 4, 2), 0)[0],
                           spec.make_batch(*rank_slice(0, 1, 4, 2), 0)[0])


@pytest.mark.parametrize("name", list(SMALL))
def test_models_are_deterministic_per_seed(name):
    spec = get_workload(name, SMALL[name])
    state = torch.random.get_rng_state()
    a, b, c = spec.build_model(0), spec.build_model(0), spec.build_model(1)
    assert torch.equal(torch.random.get_rng_state(), state)   # caller's RNG untouched
    pa, pb, pc = (torch.cat([p.flatten() for p in m.parameters()]) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    assert spec.input_is_image == (name == "cnn")


@pytest.mark.parametrize("name,steps,floor", [("cnn", 250, 0.25), ("transformer", 150, 0.35),
                                              ("mlp", 150, 0.35)])
def test_builtins_are_learnable(name, steps, floor, one_thread):
    spec = get_workload(name, SMALL[name])
    model = spec.build_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=0.9)
    for step in range(steps):
        x, y = spec.make_batch(*rank_slice(step, 0, 32, 1), 0)
        loss = spec.loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    eval_spec = WorkloadSpec(**{**spec.__dict__, "eval_samples": 512})
    correct, total = held_out_counts(eval_spec, model, 0, 0, 1)
    assert total == 512
    acc = correct / total
    # the cnn is the harder, CIFAR-like task (translated patterns, several per class): it learns
    # more slowly, by design, so that its quality does not saturate within a search
    assert acc > floor, f"{name}: held-out accuracy {acc:.3f}, chance is 0.10"


def test_held_out_counts_shard_over_ranks():
    spec = WorkloadSpec(**{**get_workload("mlp", SMALL["mlp"]).__dict__, "eval_samples": 600})
    model = spec.build_model(0)
    shards = [held_out_counts(spec, model, 0, r, 2, batch=128) for r in range(2)]
    whole = held_out_counts(spec, model, 0, 0, 1, batch=128)
    assert sum(t for _, t in shards) == 600
    assert sum(c for c, _ in shards) == whole[0]
    assert HELD_OUT_START > 10**12   # far beyond any training index


def test_torchvision_runtime_error_on_import_is_absence(tmp_path, monkeypatch):
    # The CPU torch wheel with a CUDA torchvision fails with RuntimeError, not ImportError.
    pkg = tmp_path / "torchvision"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in [m for m in sys.modules if m.startswith("torchvision")]:
        monkeypatch.delitem(sys.modules, mod)
    assert torchvision_names() == []
    with pytest.raises(WorkloadError, match="unknown workload 'resnet50'"):
        get_workload("resnet50")


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "user_wl.py").write_text(textwrap.dedent("""
        import torch
        from autotune.workloads import WorkloadSpec, get_workload

        def build(hidden=8):
            base = get_workload("mlp", {"features": 16, "hidden": hidden})
            return WorkloadSpec(name="mine", build_model=base.build_model,
                                make_batch=base.make_batch)

        def as_dict():
            base = get_workload("mlp", {"features": 16, "hidden": 8})
            return {"build_model": base.build_model, "make_batch": base.make_batch}

        def bad_dict():
            return {"model": None}

        def wrong_type():
            return torch.nn.Linear(2, 2)

        not_callable = 3
    """))
    (tmp_path / "broken_wl.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for mod in ("user_wl", "broken_wl"):
        sys.modules.pop(mod, None)


def test_entry_point_returns_spec(user_module):
    spec = get_workload("user_wl:build", {"hidden": 4})
    assert spec.name == "mine"
    assert isinstance(spec.build_model(0), torch.nn.Module)
    dspec = get_workload("user_wl:as_dict")
    assert dspec.name == "user_wl:as_dict" and dspec.make_batch(0, 2, 0)[0].shape == (2, 16)


@pytest.mark.parametrize("name,match", [
    ("user_wl:bad_dict", r"unknown spec field\(s\) \['model'\]"),
    ("user_wl:wrong_type", "returned Linear, expected autotune.workloads.WorkloadSpec"),
    ("user_wl:not_callable", "has no callable 'not_callable'"),
    ("user_wl:missing", "has no callable 'missing'"),
    ("broken_wl:build", "cannot import broken_wl: ModuleNotFoundError"),
    ("user_wl:", "expected module:function"),
])
def test_entry_point_errors(user_module, name, match):
    with pytest.raises(WorkloadError, match=match):
        get_workload(name)


def test_a_workload_module_in_the_current_folder_is_named_with_the_fix(tmp_path, monkeypatch):
    """autotune's Pythons leave the current folder off their import path (issue 46, item 4):
    a module:function found only there is refused with how to add it."""
    (tmp_path / "only_in_cwd_46.py").write_text("def build():\n    return {}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(WorkloadError, match=r"\(only_in_cwd_46 is in the current folder, which "
                       r"autotune does not import from; add the folder to PYTHONPATH\)"):
        get_workload("only_in_cwd_46:build")
