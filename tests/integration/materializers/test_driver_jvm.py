"""The driver's JVM runs with the options the session asked for (MATERIALIZERS_DRIVER_JIT), its jars
where `locate_jars` found them, and partitions sized by the master, not by this machine."""

from __future__ import annotations

from typing import Any

import pytest

from materializers.spark_session import SIZED_BY_PARALLELISM, locate_jars

pytestmark = pytest.mark.integration


def test_the_driver_jvm_compiles_with_c1_only_by_default_in_a_full_size_code_cache(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    flags = [
        str(a) for a in jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    ]
    assert "-XX:TieredStopAtLevel=1" in flags, flags
    # C1 alone would reserve 48 MB, which a long-running driver fills (the JVM then stops compiling)
    pools = {str(p.getName()): p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()}
    code_cache = [p for name, p in pools.items() if name.startswith("CodeHeap") or name == "CodeCache"]
    assert sum(int(p.getUsage().getMax()) for p in code_cache) == 240 * 1024 * 1024


def test_jars_come_from_the_located_files_and_partitions_follow_the_master(spark: Any) -> None:
    located = locate_jars()
    assert located.files, "the test stack's jars are fetched: the driver uses files, not Ivy"
    assert spark.sparkContext.getConf().get("spark.jars") == ",".join(located.files)
    # the fixture's master is local[2]: two cores, two partitions; nothing hard-wired
    assert spark.sparkContext.defaultParallelism == 2
    assert [spark.conf.get(key) for key in SIZED_BY_PARALLELISM] == ["2", "2"]
