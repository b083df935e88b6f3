"""The bytes ranks exchange instead of pickles, and the proof of the launch's secret (issue 61):
pure, with literal values."""
from __future__ import annotations

import json

from autotune.worker.dist import PROBLEM_BYTES, decode_problems, encode_problems
from autotune.worker.rendezvous import proof, ranks_text, store_name, strangers


def test_problems_travel_as_fixed_size_json_and_come_back_the_same():
    for problems in ([], ["threads 2 != 1"], ["a", "b; c", "é ü"]):
        data = encode_problems(problems)
        assert len(data) == PROBLEM_BYTES
        assert decode_problems(data) == problems


def test_too_many_problems_are_shortened_to_fit_never_dropped_silently_whole():
    data = encode_problems(["x" * 10_000, "short"])
    got = decode_problems(data)
    assert len(data) == PROBLEM_BYTES and got[1] == "short" and got[0].endswith("...")
    many = decode_problems(encode_problems(["z"] * 5000))
    assert 0 < len(many) < 5000 and set(many) == {"z"}


def test_what_is_not_a_list_of_strings_is_said_as_such():
    for junk in (b"\xff" * PROBLEM_BYTES,
                 (7).to_bytes(4, "big") + b"{'a': 1" + bytes(PROBLEM_BYTES - 11),
                 len(b'{"a": 1}').to_bytes(4, "big") + b'{"a": 1}' + bytes(PROBLEM_BYTES - 12),
                 len(json.dumps([1]).encode()).to_bytes(4, "big") + b"[1]"
                 + bytes(PROBLEM_BYTES - 7)):
        assert decode_problems(junk) == ["sent problems that cannot be read"]


def test_a_proof_is_the_ranks_own_and_the_launchs_own():
    token = "0123456789abcdef0123456789abcdef"
    good = [proof(token, r, 3) for r in range(3)]
    assert strangers(token, 3, good) == []
    assert strangers(token, 3, [good[0], good[0], good[2]]) == [1]     # rank 0's, replayed
    assert strangers(token, 3, [good[0], proof("f" * 32, 1, 3), b""]) == [1, 2]
    assert proof(token, 0, 2) != proof(token, 0, 3)                    # another world size
    assert store_name(token) != store_name("f" * 32) and "/" not in store_name(token)


def test_the_ranks_a_refusal_names_are_said_shortly():
    assert ranks_text([1]) == "rank 1"
    assert ranks_text([1, 3]) == "ranks 1, 3"
    assert ranks_text([0, 1]) == "ranks 0, 1"
    assert ranks_text(list(range(1, 8))) == "ranks 1-7"
