"""The failed-credentials limiter of `kbsql serve` (server/throttle.py) on a fake clock: the
window, the lock and its end, independence of addresses, and the memory bound. The server
itself answering 429 is tested against a real process in test_server_auth.py."""

from __future__ import annotations

import logging

import pytest

from kbsql.server.throttle import FailureThrottle, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_tenth_failure_in_a_window_locks_the_address_for_a_window(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=10, window_s=60, clock=clock)
    for _ in range(9):
        throttle.failed("203.0.113.7")
        clock.now += 1
    assert throttle.retry_after("203.0.113.7") is None
    with caplog.at_level(logging.WARNING, logger="kbsql.server"):
        throttle.failed("203.0.113.7")
    assert throttle.retry_after("203.0.113.7") == 60
    assert throttle.retry_after("203.0.113.8") is None  # other addresses are not touched
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "203.0.113.7" in lines[0] and "10" in lines[0]
    clock.now += 59.5
    assert throttle.retry_after("203.0.113.7") == 1
    clock.now += 0.5
    assert throttle.retry_after("203.0.113.7") is None  # the window passed
    throttle.failed("203.0.113.7")  # a fresh count: one failure does not lock again
    assert throttle.retry_after("203.0.113.7") is None


def test_failures_spread_wider_than_the_window_never_lock() -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=3, window_s=10, clock=clock)
    for _ in range(20):
        throttle.failed("a")
        assert throttle.retry_after("a") is None
        clock.now += 5.01  # at most two in any 10 s


def test_failures_during_a_lock_do_not_extend_it_nor_log_again(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=2, window_s=10, clock=clock)
    with caplog.at_level(logging.WARNING, logger="kbsql.server"):
        for _ in range(5):
            throttle.failed("a")
            clock.now += 1
    assert throttle.retry_after("a") == 6
    assert len(caplog.records) == 1


def test_memory_is_bounded_and_state_expires() -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=2, window_s=10, max_addresses=100, clock=clock)
    throttle.failed("first")
    throttle.failed("first")
    assert throttle.retry_after("first") == 10
    for n in range(1000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}")
        assert len(throttle) <= 100
    assert throttle.retry_after("first") is None  # the oldest went first
    assert len(throttle) == 100
    clock.now += 10
    throttle.failed("late")  # anything untouched for a window is dropped
    assert len(throttle) == 1


def test_client_key() -> None:
    assert client_key(("203.0.113.9", 5555)) == "203.0.113.9"
    assert client_key(("2001:db8:1:2:aaaa::1", 1)) == client_key(("2001:db8:1:2:bbbb::9", 2)) \
        == "2001:db8:1:2::/64"
    assert client_key(("::ffff:203.0.113.9", 1)) == "203.0.113.9"
    assert client_key(None) == "unknown"


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        FailureThrottle(limit=0)


def test_an_address_block_is_locked_as_a_whole() -> None:
    """Six addresses of one /24 (of 127.0.0.0/8 on loopback) get three addresses' worth of
    guesses between them, not six; another block and IPv6 /64s are counted apart."""
    clock = Clock()
    throttle = FailureThrottle(limit=10, window_s=60, clock=clock)
    for block, other in (("203.0.113.", "203.0.114.1"), ("127.0.", "128.0.0.1")):
        guesses = 0
        for n in range(60):
            address = f"{block}{n % 6 + 1}" if block.count(".") == 3 else f"{block}{n % 6}.{n % 6 + 1}"
            if throttle.retry_after(address) is None:
                throttle.failed(address)
                guesses += 1
        assert guesses == 30
        assert throttle.retry_after(f"{block}{200}" if block.count(".") == 3 else "127.255.0.1") == 60
        assert throttle.retry_after(other) is None
    throttle.failed("2001:db8:0:1::/64")
    assert throttle.retry_after("2001:db8:0:2::/64") is None
