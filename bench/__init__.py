"""The toolkit's benchmarks: scenarios run by one harness (`python -m bench list | run NAME`).

`bench.scenarios` registers every scenario; `bench.harness` holds what they share (the stack, the
percentiles, the load and CPU probes, the one result writer, the runner); `bench.peers` the baselines
they are compared with; `bench/micro` the micro-benchmarks (pytest-benchmark tests).
"""
