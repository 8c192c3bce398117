"""A Spark master that answers on none of its addresses is refused before anything starts."""

from __future__ import annotations

import socket

import pytest

from materializers.errors import MaterializerError
from materializers.spark.session import require_master


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_local_masters_need_no_answer() -> None:
    require_master("local[*]")
    require_master("local[2]")


def test_a_listening_master_or_a_listening_standby_passes() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        require_master(f"spark://127.0.0.1:{port}")
        require_master(f"spark://127.0.0.1:{_closed_port()},127.0.0.1:{port}")


@pytest.mark.parametrize("address", ["127.0.0.1:{closed}", "no-port-here", "127.0.0.1:notaport"])
def test_a_master_that_does_not_answer_is_refused_naming_the_settings(address: str) -> None:
    master = "spark://" + address.format(closed=_closed_port())
    with pytest.raises(
        MaterializerError,
        match=r"does not answer \(from --master, MATERIALIZERS_MASTER or SPARK_MASTER_URL\)",
    ):
        require_master(master, timeout_s=1.0)
