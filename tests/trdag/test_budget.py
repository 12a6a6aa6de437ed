"""trDAG messages parked until their children arrive are charged to the session budget
("unverified"): a peer sending descendants of what it never sends is cut off at the
budget, not at the pool's 100,000 (up to 2.7 KB each)."""
import random

import pytest

from tssb.session.budget import BudgetExceeded, Limits, Pool
from tssb.trdag import dagstore

from dagutil import grow, new_dag


def test_parked_messages_are_charged_and_released():
    idx, root, authors = new_dag(3)
    msgs = [idx.get(root)] + grow(idx, root, authors, 12, random.Random(3))
    budget = Pool(Limits(unverified=5)).budget()
    dag = dagstore.Dag(dagstore.MemDagIndex(), budget=budget)
    late = list(reversed(msgs[1:]))           # every one waits for an earlier one
    for m in late[:5]:
        assert dag.offer(m) == []
    assert budget.held["unverified"] == 5
    with pytest.raises(BudgetExceeded) as e:
        dag.offer(late[5])
    assert e.value.reason == "budget: unverified"
    dag.release()
    assert budget.held["unverified"] == 0 and not dag.pending


def test_admitted_messages_give_their_charge_back():
    idx, root, authors = new_dag(4)
    msgs = [idx.get(root)] + grow(idx, root, authors, 8, random.Random(4))
    budget = Pool(Limits(unverified=100)).budget()
    dag = dagstore.Dag(dagstore.MemDagIndex(), budget=budget)
    for m in reversed(msgs[1:]):
        dag.offer(m)
    assert budget.held["unverified"] == len(msgs) - 1
    admitted = dag.offer(msgs[0])             # the root unblocks everything
    assert len(admitted) == len(msgs) and budget.held["unverified"] == 0
