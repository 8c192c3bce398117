from __future__ import annotations

from materializers.views.redis_cache import RedisCache
from materializers.views.redis_windows import CurrentWindows


def test_current_window_keys_keep_group_values_apart() -> None:
    windows = CurrentWindows(RedisCache("redis://127.0.0.1:1/0", "demo:skus"), ("sku", "till"), ("lines",))
    assert windows.key(["a:b", 7]) == 'demo:skus:current:["a:b",7]'
    assert windows.key(["a", "b:7"]) != windows.key(["a:b", 7])
