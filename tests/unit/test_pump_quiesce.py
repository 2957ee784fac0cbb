"""The local stack's quiet signal (interlude.local.pump.quiesce; the control endpoint that serves it to tests over
HTTP): it returns only after each pump has completed a poll begun after the call that found nothing to move, and it
says which pump was not quiet when its bound passes (stuck, failing, kept busy)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import requests

from interlude.local.control import ControlApi
from interlude.local.pump import NotQuiet, Pump, quiesce


class Scripted(Pump):
    """A pump whose polls run `poll(number)`; `entered[n]` is set when poll n begins."""

    def __init__(self, name: str, poll: Callable[[int], int]) -> None:
        super().__init__(name, interval_s=0.01, backs_off=True)
        self.poll = poll
        self.polls = 0
        self.entered: dict[int, threading.Event] = {n: threading.Event() for n in range(1, 4)}

    def pump_once(self) -> int:
        self.polls += 1
        if self.polls in self.entered:
            self.entered[self.polls].set()
        return self.poll(self.polls)


@pytest.fixture
def pumps() -> Iterator[list[Pump]]:
    started: list[Pump] = []
    yield started
    for pump in started:
        pump.stop()


def in_background(target: Callable[[], None]) -> tuple[threading.Thread, list[BaseException]]:
    raised: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


def test_an_empty_poll_begun_before_the_call_does_not_count(pumps: list[Pump]) -> None:
    first_ends, second_ends = threading.Event(), threading.Event()
    gates = {1: first_ends, 2: second_ends}

    def poll(number: int) -> int:
        if number in gates:
            gates[number].wait(10)
        return 0

    pump = Scripted("scripted", poll)
    pumps.append(pump.start())
    assert pump.entered[1].wait(10)

    waiting, raised = in_background(lambda: quiesce([pump], timeout_s=30))
    # The poll in progress at the call finds nothing: it began before the call, so the barrier waits on.
    first_ends.set()
    assert pump.entered[2].wait(10)
    waiting.join(0.5)
    assert waiting.is_alive()

    # The next poll, begun after the call, finds nothing: the barrier returns.
    second_ends.set()
    waiting.join(10)
    assert not waiting.is_alive()
    assert raised == []


def test_it_waits_for_work_to_be_moved_and_for_what_one_pump_hands_another(pumps: list[Pump]) -> None:
    upstream_items = [1, 2, 3]
    downstream_items: list[int] = []
    carried: list[int] = []

    def upstream(_: int) -> int:
        if upstream_items:
            downstream_items.append(upstream_items.pop())
            return 1
        return 0

    def downstream(_: int) -> int:
        if downstream_items:
            carried.append(downstream_items.pop())
            return 1
        return 0

    pumps.extend([Scripted("downstream", downstream).start(), Scripted("upstream", upstream).start()])

    quiesce(pumps, timeout_s=30)

    assert (upstream_items, downstream_items, sorted(carried)) == ([], [], [1, 2, 3])


def test_work_handed_on_and_not_ended_keeps_a_pump_from_being_quiet(pumps: list[Pump]) -> None:
    ended = threading.Event()

    class HandsOn(Scripted):
        def in_flight(self) -> bool:
            return not ended.is_set()

    pump = HandsOn("hands-on", lambda _: 0)
    pumps.append(pump.start())
    with pytest.raises(NotQuiet, match="hands-on"):
        quiesce([pump], timeout_s=0.3)
    ended.set()
    quiesce([pump], timeout_s=30)


@pytest.mark.parametrize(
    "behaviour",
    ["stuck", "failing", "always-busy"],
)
def test_a_pump_that_is_never_quiet_is_named_when_the_bound_passes(pumps: list[Pump], behaviour: str) -> None:
    released = threading.Event()

    def poll(_: int) -> int:
        if behaviour == "stuck":
            released.wait(30)
        if behaviour == "failing":
            raise RuntimeError("the poll failed")
        return 1 if behaviour == "always-busy" else 0

    quiet = Scripted("quiet", lambda _: 0)
    broken = Scripted(behaviour, poll)
    pumps.extend([quiet.start(), broken.start()])
    # Long enough for the quiet pump's one poll on a loaded machine (0.3 s was not, once in a whole-suite run), so
    # only the broken pump is named.
    bound = 1.0
    try:
        with pytest.raises(NotQuiet) as refused:
            quiesce(pumps, timeout_s=bound)
    finally:
        released.set()
    assert str(refused.value) == f"no poll that found nothing to move within {bound} s: {behaviour}"


@pytest.fixture
def control() -> Iterator[tuple[str, list[float]]]:
    asked: list[float] = []

    def answer(timeout_s: float) -> None:
        asked.append(timeout_s)
        if timeout_s < 1:
            raise NotQuiet("no poll that found nothing to move within 0.5 s: stream-pump")

    api = ControlApi(answer).start()
    try:
        yield api.endpoint, asked
    finally:
        api.stop()


def test_the_control_endpoint_answers_whether_the_stack_is_quiet(control: tuple[str, list[float]]) -> None:
    endpoint, asked = control
    quiet = requests.post(f"{endpoint}/quiesce?timeoutSeconds=20", timeout=10)
    assert (quiet.status_code, quiet.json()) == (200, {"quiet": True})
    not_quiet = requests.post(f"{endpoint}/quiesce?timeoutSeconds=0.5", timeout=10)
    assert (not_quiet.status_code, not_quiet.json()) == (
        504,
        {"error": "no poll that found nothing to move within 0.5 s: stream-pump"},
    )
    assert asked == [20.0, 0.5]


def test_the_control_endpoint_refuses_what_it_does_not_serve(control: tuple[str, list[float]]) -> None:
    endpoint, asked = control
    bad = requests.post(f"{endpoint}/quiesce?timeoutSeconds=soon", timeout=10)
    assert (bad.status_code, bad.json()) == (400, {"error": "timeoutSeconds is a number of seconds"})
    unknown = requests.post(f"{endpoint}/runs", timeout=10)
    assert (unknown.status_code, unknown.json()) == (404, {"error": "only POST /quiesce"})
    assert asked == []
