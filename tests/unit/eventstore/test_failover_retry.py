"""Reads that meet a broker's loss are retried until the election is over; other errors are not."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from eventstore.kafkaio import consumer_fatal, transient, until_failover_ends


def _failing(codes: list[int], answer: str = "rebuilt") -> tuple[list[str], Callable[[], str]]:
    calls: list[str] = []

    def fn() -> str:
        calls.append("try")
        if codes:
            raise KafkaException(KafkaError(codes.pop(0)))
        return answer

    return calls, fn


def test_a_destroyed_broker_handle_and_a_moved_leader_are_transient_an_auth_failure_is_not() -> None:
    assert transient(KafkaException(KafkaError(KafkaError._DESTROY_BROKER)))
    assert transient(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
    assert not transient(KafkaException(KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED)))
    assert not transient(KafkaException(KafkaError(KafkaError._DESTROY_BROKER, fatal=True)))


def test_the_rebuild_is_tried_again_after_forgetting_its_half_until_it_succeeds() -> None:
    calls, fn = _failing([KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT])
    forgotten: list[int] = []
    result = until_failover_ends(fn, what="rebuild", deadline_s=30, on_retry=lambda: forgotten.append(1))
    assert result == "rebuilt" and len(calls) == 3 and len(forgotten) == 2


def test_a_non_transient_error_is_raised_at_once() -> None:
    calls, fn = _failing([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        until_failover_ends(fn, what="rebuild", deadline_s=30, on_retry=lambda: None)
    assert len(calls) == 1


def test_a_failover_that_outlasts_the_deadline_is_raised() -> None:
    calls, fn = _failing([KafkaError._ALL_BROKERS_DOWN] * 100)
    with pytest.raises(KafkaException):
        until_failover_ends(fn, what="rebuild", deadline_s=0.5, on_retry=lambda: None)
    assert 2 <= len(calls) < 5


def test_end_offsets_wait_for_a_moving_leader_but_not_for_an_absent_cluster() -> None:
    from eventstore.kafkaio import _LEADER_MOVING

    assert transient(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)), _LEADER_MOVING)
    assert not transient(KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN)), _LEADER_MOVING)


def test_a_consumed_fatal_error_counts_by_its_code_as_by_its_flag() -> None:
    # What `consume` hands over when a static member is fenced: code _FATAL, the flag unset.
    assert consumer_fatal(KafkaError(KafkaError._FATAL, "Static consumer fenced by other consumer"))
    assert consumer_fatal(KafkaError(KafkaError._TRANSPORT, fatal=True))
    assert not consumer_fatal(KafkaError(KafkaError._PARTITION_EOF))
    assert not consumer_fatal(None)
