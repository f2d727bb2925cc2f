"""The garbage collector held off inside the block and given back as it was, even on an error."""

from __future__ import annotations

import gc

import pytest

from onceflow.gc_pause import gc_paused


def test_the_collector_is_off_inside_and_back_after_even_on_an_error():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_already_off_stays_off():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
