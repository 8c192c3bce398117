"""The driver's JVM runs with the options the session asked for (MATERIALIZERS_DRIVER_JIT)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.integration


def test_the_driver_jvm_compiles_with_c1_only_by_default(spark: Any) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    flags = [str(a) for a in runtime.getInputArguments()]
    assert "-XX:TieredStopAtLevel=1" in flags, flags
