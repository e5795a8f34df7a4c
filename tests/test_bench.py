"""Smoke test of ``sigprop.bench`` at toy sizes: it runs, rows are well formed, numbers agree.

No wall-clock assertion anywhere (times on shared machines are noise); only that every
benchmark produces finite numbers and that the batched and naive implementations agree.
"""
import json
import re
import math

import pytest
import torch

import sigprop as sp
from sigprop import bench
import reference_transformer


def test_tiny_run_and_table(tmp_path):
    res = bench.run(tiny=True, only=["forward", "naive", "diagram", "grad"], threads=1)
    rows = res["rows"]
    assert {r["bench"] for r in rows} == {"forward", "naive loop", "diagram", "per-sample grad"}
    for r in rows:
        assert set(r) >= {"bench", "setting", "metric", "value", "goal", "meets"}
        assert isinstance(r["value"], float) and math.isfinite(r["value"]) and r["value"] > 0 or r["value"] == 0.0
    table = bench.format_table(res)
    assert "benchmark" in table and "naive loop" in table
    # float64 naive vs batched: float rounding only
    diff = [r for r in rows if r["metric"].startswith("max |batched - naive|")]
    assert diff and all(r["value"] < 1e-12 for r in diff)
    # vmap(grad) agrees with the loop of autograd.grad
    assert all(r["max_rel_diff"] < 1e-4 for r in rows if r["bench"] == "per-sample grad")
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(res, default=str))
    assert json.loads(path.read_text())["rows"]


def test_the_record_in_words():
    """The benchmarks page's table and sentence (bench.speed_table, bench.goals_summary) from the committed run."""
    speed = [r for r in bench.load_record()["rows"] if r["bench"] != "pages"]
    table = bench.speed_table(speed)
    assert list(table.columns) == ["benchmark", "setting", "result", "goal"] and len(table) == len(speed)
    assert all(re.match(r"[A-Za-z/ ,-]+: [0-9.e+-]+( ×| s| MB)?$", t) for t in table["result"]), list(table["result"])
    goals = [r for r in speed if r["meets"] is not None]
    met = sum(bool(r["meets"]) for r in goals)
    text = bench.goals_summary(speed)
    assert text.startswith(f"Goals met in this run: {met} of {len(goals)}") and "vmap" in text
    missed = dict(speed[0], goal="< 1 s", meets=False, metric="time (s)", value=2.5)
    assert "Missed: " in bench.goals_summary([missed]) and "time: 2.5 s, goal < 1 s" in bench.goals_summary([missed])


def test_ipr_subprocess_tiny():
    rows = bench.bench_ipr(T=2048, n_beta=2, queries=2, inits=2, d=4, threads=1)
    seconds, memory = rows
    assert seconds["value"] > 0 and memory["value"] > 0 and memory["finite_in_range"]
    assert seconds["goal"] is None  # goals apply only at the sizes


def test_naive_transformer_matches_engine_all_variants():
    for kw in (dict(norm="pre", heads=2, causal=True), dict(norm="none", gain_control=True, activation="tanh",
                                                            alpha_sa=0.5, branch_mlp=0.3)):
        cfg = sp.BlockConfig(d=8, sigma_qk2=0.2, sigma_b2=0.1, **kw)
        params = sp.sample_transformer(cfg, 2, inits=2, generator=0, dtype=torch.float64)
        x = sp.gaussian_tokens(2, 3, T=4, d=8, generator=1, dtype=torch.float64)
        models = [reference_transformer.NaiveTransformer(cfg, 2).double().load(params, i) for i in range(2)]
        with torch.no_grad():
            ref = reference_transformer.naive_forward(models, x)
            assert torch.allclose(sp.transformer_forward(x, params, cfg), ref, atol=1e-12)


def test_forward_flops_counts_matmuls():
    cfg = sp.BlockConfig(d=4, mlp=False)
    # QKV: 2*T*d*3d, logits and A V: 2*T*T*2d
    assert bench.forward_flops(cfg, 1, 1, 1, 3) == 2 * 3 * 4 * 12 + 2 * 9 * 8


def test_bad_benchmark_name():
    with pytest.raises(ValueError, match="only must name benchmarks"):
        bench.run(tiny=True, only=["nope"])


def test_cli_tiny(tmp_path, capsys):
    from sigprop.bench.__main__ import main

    out = tmp_path / "b.json"
    assert main(["--tiny", "--only", "diagram", "--threads", "1", "--json", str(out)]) == 0
    assert "diagram" in capsys.readouterr().out
    assert json.loads(out.read_text())["rows"]


def test_cli_checks_threads_and_load_before_running(tmp_path, capsys):
    # issue 26, item 9: --threads 100000 crashed torch (rc 139); item 15: --load without --pages was ignored
    from sigprop.bench.__main__ import main

    for argv, match in [(["--threads", "100000"], "this machine's CPUs"), (["--threads", "0"], "from 1 to"),
                        (["--tiny", "--load"], "--load times pages .* needs --pages"),
                        (["--tiny", "--json", str(tmp_path / "no" / "b.json")], "no folder")]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert re.search(match, capsys.readouterr().err), argv
    with pytest.raises(ValueError, match="threads must be <= "):
        bench.run(tiny=True, only=["diagram"], threads=10**5)
    with pytest.raises(ValueError, match="pages_load .* needs pages"):
        bench.run(tiny=True, only=["diagram"], pages_load=True)


def test_committed_record_covers_every_page_under_load():
    """The benchmarks page replays RECORD: it must be a full ``make bench-record`` run of today's pages."""
    import os

    from sigprop.bench._pages import _notebooks
    from sigprop.bench._speed import _repo_root

    rec = bench.load_record()
    assert "--pages" in rec["meta"]["command"] and "--load" in rec["meta"]["command"], rec["meta"]["command"]
    pages = {r["setting"]: r for r in rec["rows"] if r["bench"] == "pages" and r["setting"] != "total"
             and not r["setting"].startswith("book/assignments/")}   # otter masters, timed by the 53cf013 harness
    root = _repo_root()
    expected = {os.path.relpath(p, root) for p in _notebooks(root)}
    assert set(pages) == expected, f"record is stale: missing {sorted(expected - set(pages))}, extra {sorted(set(pages) - expected)}"
    assert all(r["under_load"] for r in pages.values())
    assert not [s for s, r in pages.items() if r["error"]], "pages that failed in the recorded run"
    assert not [s for s, r in pages.items() if r["wrote_outside_build"]], "pages that wrote outside the build"
    speed = {r["bench"] for r in rec["rows"]}
    assert {"forward", "naive loop", "diagram", "per-sample grad"} <= speed


def test_bounded_kernel_waits_poll_in_slices_and_keep_the_contract():
    """bench._pages.bound_kernel_waits: a message is returned as soon as a slice sees it, Empty after timeout."""
    import asyncio
    import time
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    from sigprop.bench._pages import bound_kernel_waits

    original = AsyncZMQSocketChannel.get_msg
    try:
        bound_kernel_waits(step=0.05)

        class Socket:          # a message that a poll sees only from the third slice on (a missed wake-up)
            def __init__(self, ready_after):
                self.polls, self.ready_after = [], ready_after

            async def poll(self, timeout_ms):
                self.polls.append(timeout_ms)
                await asyncio.sleep(timeout_ms / 1000)
                return int(len(self.polls) > self.ready_after)

        channel = object.__new__(AsyncZMQSocketChannel)

        async def recv():
            return {"msg": "reply"}

        channel._recv = recv
        channel.socket = Socket(ready_after=2)
        assert asyncio.run(channel.get_msg(timeout=10.0)) == {"msg": "reply"}
        assert channel.socket.polls == [50, 50, 50]          # three 50 ms slices, not one 10 s poll
        channel.socket = Socket(ready_after=10**6)
        t = time.perf_counter()
        with pytest.raises(Empty):
            asyncio.run(channel.get_msg(timeout=0.12))
        assert 0.1 <= time.perf_counter() - t < 1.0
        with pytest.raises(ValueError, match="step"):
            bound_kernel_waits(step=0)
    finally:
        AsyncZMQSocketChannel.get_msg = original
