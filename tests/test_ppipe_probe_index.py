"""probe() with the per-pool index (core/pipelines/table.py) gives exactly the plain scan's reservations (Appendix A.3)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.pipelines.reservations import PipeRuntime, Reservations, probe, reserve

N_GPUS, N_NODES = 16, 3


@st.composite
def pipelines(draw):
    """Two pipelines of 1–3 stages over 16 vGPUs on 3 servers (pools of 1–4, disjoint; servers shared).

    Latencies may be 0 (a stage the index leaves to the scan) and transfers 0.
    """
    ids = list(range(N_GPUS))
    nodes = [draw(st.integers(0, N_NODES - 1)) for _ in ids]
    draw(st.randoms()).shuffle(ids)
    pipes, pos = [], 0
    for m in range(2):
        workers = []
        for _ in range(draw(st.integers(1, 3))):
            k = draw(st.integers(1, 4))
            workers.append(ids[pos:pos + k])
            pos += k
        lat = [[0] + [draw(st.integers(0, 30)) * b for b in range(1, 4)] for _ in workers]
        tin = [[0] * 4] + [[0] + [draw(st.integers(0, 10)) * b for b in range(1, 4)] for _ in workers[1:]]
        pipes.append(PipeRuntime(m, draw(st.integers(1, 3)), workers, [[nodes[w] for w in ws] for ws in workers],
                                 lat, tin, 3))
    return pipes


#: a step: probe pipeline `which` at batch `bs` after `dt` µs with wait bound `bound` (None: unbounded) and
#: reserve its path, or (kind "gap") reserve a random interval on a later-stage vGPU or a link, making gaps
steps = st.lists(st.one_of(
    st.tuples(st.just("probe"), st.integers(0, 1), st.integers(1, 3), st.integers(0, 25),
              st.none() | st.integers(0, 120)),
    st.tuples(st.just("gap"), st.integers(0, 10 ** 6), st.integers(0, 80), st.integers(1, 20))), max_size=40)


def later_stage_resources(pipes) -> list[int]:
    gpus = [w for p in pipes for pool in p.workers[1:] for w in pool]
    return gpus + list(range(N_GPUS, N_GPUS + 2 * N_NODES))


def check_index(res: Reservations) -> None:
    """The index invariant: each pool's keys are its vGPUs' (last_end, position), sorted; pool_bf is the max busy_from."""
    pools: dict[int, list[tuple[int, int]]] = {}
    for w, m in enumerate(res.member):
        if m is not None:
            keys, i, shift, pid = m
            pools.setdefault(pid, []).append((w, i))
            assert keys is res.member[w][0]
    for pid, ws in pools.items():
        keys, _, shift, _ = res.member[ws[0][0]]
        assert keys == sorted((res.last_end[w] << shift) | i for w, i in ws)
        assert res.pool_bf[pid] == max(res.busy_from[w] for w, _ in ws)


@given(pipelines(), steps)
@settings(max_examples=200, deadline=None)
def test_indexed_probe_equals_the_plain_scan(pipes, plan):
    fast, plain = Reservations(N_GPUS, N_NODES), Reservations(N_GPUS, N_NODES, index=False)
    others = later_stage_resources(pipes)
    now = 0
    probed = set()
    for step in plan:
        if step[0] == "gap":
            _, pick, offset, dur = step
            r = others[pick % len(others)]
            start = now + offset
            if all(e <= start or s >= start + dur for s, e in plain.intervals(r)):
                fast.reserve(r, start, dur, now)
                plain.reserve(r, start, dur, now)
            continue
        _, which, bs, dt, bound = step
        now += dt
        pipe = pipes[which]
        bound = 1 << 62 if bound is None else bound
        got = probe(fast, pipe, bs, now, bound)
        want = probe(plain, pipe, bs, now, bound)
        assert got == want  # same finish, wait and every (resource, start, duration)
        full = probe(plain, pipe, bs, now)
        reserve(fast, full[2], now)
        reserve(plain, full[2], now)
        probed.add(which)
        check_index(fast)
    assert not any(m is not None for m in plain.member)
    for r in range(N_GPUS + 2 * N_NODES):
        assert fast.intervals(r) == plain.intervals(r)
    # every probed pool is indexed, so the comparison tested the index
    assert all(fast.member[w] is not None for i in probed for pool in pipes[i].workers for w in pool)


def test_pools_sharing_a_vgpu_are_left_to_the_scan():
    res = Reservations(4, 1)
    assert res.index_pool([0, 1]) is not None
    assert res.index_pool([1, 2]) is None  # vGPU 1 already has a key
    assert res.index_pool([]) is None
    assert res.index_pool([3]) is not None
    assert Reservations(4, 1, index=False).index_pool([0, 1]) is None
