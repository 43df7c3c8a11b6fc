"""Exploration ids (`envelope.new_id`): 16 hex digits, never the same twice, across blocks and forks."""

from __future__ import annotations

import os
import re

from ontoos_explore import envelope
from ontoos_explore.envelope import IDS_PER_READ, new_id


def test_ids_are_sixteen_hex_digits_and_all_different_across_blocks() -> None:
    ids = [new_id() for _ in range(IDS_PER_READ * 5)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_child_does_not_draw_its_parents_ids() -> None:
    new_id()  # a block is loaded: a child that kept it would hand out the parent's next ids
    assert envelope._used > 0
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        try:
            os.write(write, " ".join(new_id() for _ in range(20)).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as f:
        child = set(f.read().split())
    parent = {new_id() for _ in range(20)}
    assert len(child) == 20 and not child & parent
