"""Transactional ids: distinct for live instances, reused after one is gone."""

import socket
import uuid

from fastpubsub.runtime.instance import InstanceSlot


def test_slots_are_exclusive_and_reused():
    group = f"g-{uuid.uuid4().hex[:8]}"
    a, b = InstanceSlot(group), InstanceSlot(group)
    assert (a.slot, b.slot) == (0, 1)
    assert a.transactional_id == f"{group}-{socket.gethostname()}-0"
    a.release()
    c = InstanceSlot(group)
    assert c.slot == 0  # a restarted instance takes its predecessor's id
    b.release()
    c.release()
