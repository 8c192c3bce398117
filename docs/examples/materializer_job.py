"""A materializer's Job: `materializers.run` builds one per materializer (one SparkSession for all)
and runs its streaming query; `available_now` reads what the topic holds, then returns. Here the
shop's `orders` materializer keeps a Redis cache of a fresh store's orders. Run against the stack:

    set -a; source .stack/env; set +a; .venv/bin/python docs/examples/materializer_job.py
"""

from __future__ import annotations

import os
import tempfile

import redis
from _stack import drop_keys, order_events, unique

from materializers import JobPlan, RunConfig, run, verify
from shop.orders import ORDERS

prefix = unique("docs-job")
with order_events(orders=4) as store, tempfile.TemporaryDirectory() as home:
    config = RunConfig.from_env().with_overrides(
        home=home, topic=store.events_topic, redis_prefix=prefix, views="cache", master="local[1]"
    )  # its own checkpoint (in home), Redis prefix and dead letters (<topic>.dlq)
    try:
        code = run(ORDERS, config=config, start="earliest", available_now=True)
        print("run returned", code)
        plan = JobPlan.of(ORDERS, config)  # what the job ran: topic, checkpoint, views
        batches = sorted(p.name for p in (plan.checkpoint / "commits").iterdir() if p.name.isdigit())
        print("batches committed:", len(batches))
        with redis.Redis.from_url(os.environ["REDIS_URL"], decode_responses=True) as cache:
            keys = sorted(cache.scan_iter(match=f"{plan.redis_prefix}:*"))
            print("orders cached:", len(keys))
            fields = cache.hgetall(f"{plan.redis_prefix}:order-2")
            print("order-2:", {k: v for k, v in sorted(fields.items()) if not k.startswith("_")})
        print("differences from the fold of the topic:", len(verify(plan)))
    finally:
        drop_keys(prefix)
