"""Threads: copies, pins and allocations from many threads at once, and closes racing them."""

import errno
import gc
import threading
import time

import pytest

import gdrapi_rs

THREADS = 8


def run(target, n=THREADS):
    errors = []

    def guarded(i):
        try:
            target(i)
        except BaseException as e:  # reported in the main thread
            errors.append(e)
    ts = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def test_copies_through_one_mapping(device_array, leaks):
    a = device_array(THREADS * 65536 * 2)
    p = gdrapi_rs.pin(a)

    def work(i):
        base = i * 131072
        for k in range(200):
            p.write_u64(base + 8 * (k % 64), k)
            assert p.read_u64(base + 8 * (k % 64)) == k
            small = bytes([i, k & 0xFF]) * 32
            p.write(base + 1024, small)
            assert p.read(base + 1024, 64) == small
        big = bytes([i]) * 100000  # above HELD_MAX: the GIL is released meanwhile
        p.write(base + 4096, big)
        assert p.read(base + 4096, len(big)) == big
    run(work)
    for i in range(THREADS):
        assert a.read(i * 131072 + 4096, 100000) == bytes([i]) * 100000
    p.close()


def test_pins_and_sessions_from_threads(device_array, session, leaks):
    a = device_array(THREADS * 65536)

    def work(i):
        for k in range(20):
            with session.pin(a.ptr + i * 65536, 65536) as p:
                p.write(0, bytes([i]) * 16)
            if k % 5:
                continue  # a session of its own now and then (on a GPU, each opens a driver)
            s = gdrapi_rs.Session()
            p = s.pin(a.ptr + i * 65536, 4096)
            assert p.read(0, 16) == bytes([i]) * 16
            s.close()
            assert p.closed
    run(work)


def test_allocations_from_threads(allocator, leaks):
    def work(i):
        mine = []
        for k in range(100):
            x = allocator.alloc(8 if k % 10 else 1 << 20)
            x.write_u64(0, i * 1000 + k)
            mine.append(x)
        for k, x in enumerate(mine):
            assert x.read_u64(0) == i * 1000 + k
        for x in mine[::2]:
            x.free()
    run(work)
    gc.collect()
    assert allocator.info().allocations == 0


def race_copies_with(close, copy):
    """Runs copy(i) in THREADS threads, all started before close() runs: each copies until a copy
    raises GdrError EINVAL (closed), and copies completed before that."""
    started = threading.Barrier(THREADS + 1)
    closed = []
    copies = [0] * THREADS

    def copier(i):
        started.wait()
        while True:
            try:
                copy(i)
                copies[i] += 1
            except gdrapi_rs.GdrError as e:
                assert e.errno == errno.EINVAL and "closed" in str(e)
                closed.append(i)
                return

    ts = [threading.Thread(target=copier, args=(i,)) for i in range(THREADS)]
    for t in ts:
        t.start()
    started.wait()
    time.sleep(0.02)
    close()
    for t in ts:
        t.join()
    assert sorted(closed) == list(range(THREADS)) and sum(copies) > 0


@pytest.mark.parametrize("size", [8, 200000])
def test_close_racing_copies(device_array, leaks, size):
    """One thread closes the mapping while others copy through it: every copy either
    completes or raises GdrError (closed); none touches unmapped memory."""
    a = device_array(1 << 20)
    data = [bytes([i]) * size for i in range(THREADS)]
    for _ in range(5):
        p = gdrapi_rs.pin(a)

        def copy(i, p=p):
            p.write(0, data[i])
            p.read(0, size)

        race_copies_with(p.close, copy)


def test_free_racing_copies(allocator, leaks):
    for _ in range(5):
        x = allocator.alloc(1 << 20)

        def copy(i, x=x):
            x.write_u64(8 * i, i)
            x.read(0, 100000)

        race_copies_with(x.free, copy)


@pytest.mark.parametrize("what", ["not thread-safe library", "no GIL"])
def test_locked_paths(device_array, monkeypatch, leaks, what):
    """With a library that is not thread-safe (NVIDIA's: every call but the copies serialized,
    copies counted against unmaps) or without a GIL (free-threaded Python: copies counted),
    the same operations, from threads."""
    from gdrapi_rs import _lib
    if what == "no GIL":
        monkeypatch.setattr(_lib, "GIL", False)
    else:
        monkeypatch.setattr(_lib.gdr(), "thread_safe", False)
    a = device_array(THREADS * 4096)
    s = gdrapi_rs.Session()
    p = s.pin(a)
    assert not p.mapping._s.direct
    alloc = gdrapi_rs.Allocator(0)
    x = alloc.alloc(THREADS * 64)
    assert not alloc._a.fast

    def work(i):
        for k in range(50):
            p.write_u64(i * 4096, k)
            assert p.read_u64(i * 4096) == k
            p.write(i * 4096 + 8, b"ab")
            assert p.read(i * 4096 + 8, 2) == b"ab"
            x.write_u64(i * 64, k)
            assert x.read_u64(i * 64) == k
            x.write(i * 64 + 8, b"cd")
            assert x.read(i * 64 + 8, 2) == b"cd"
    run(work)
    s.close()
    alloc.close()
    assert x.closed
    assert p.closed
    with pytest.raises(gdrapi_rs.GdrError):
        p.write(0, b"x")


def test_closes_racing_closes(device_array, leaks):
    """Pins, mappings and sessions closed by several threads at once while large copies (the
    GIL released) are in flight: each object is released once, every close returns once it
    is, and the copies end or raise GdrError."""
    a = device_array(1 << 20)
    for _ in range(5):
        s = gdrapi_rs.Session()
        p = s.pin(a)
        m = p.mapping
        go = threading.Barrier(7)

        def copier():
            go.wait()
            try:
                while True:
                    p.write(0, bytes(300000))
            except gdrapi_rs.GdrError as e:
                assert "closed" in str(e)

        def closer(what):
            go.wait()
            time.sleep(0.01)
            what.close()
            assert what.closed
        ts = [threading.Thread(target=copier) for _ in range(3)]
        ts += [threading.Thread(target=closer, args=(x,)) for x in (m, p, s, p)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert m.closed and p.closed and s.closed


def test_allocator_close_racing_frees(leaks):
    for _ in range(5):
        alloc = gdrapi_rs.Allocator(0)
        xs = [alloc.alloc(1 << 20) for _ in range(3)]
        go = threading.Barrier(len(xs) * 2 + 1)

        def copier(x):
            go.wait()
            try:
                while True:
                    x.write(0, bytes(300000))
            except gdrapi_rs.GdrError as e:
                assert "closed" in str(e)

        def freer(x):
            go.wait()
            time.sleep(0.01)
            x.free()
            assert x.closed
        ts = [threading.Thread(target=copier, args=(x,)) for x in xs]
        ts += [threading.Thread(target=freer, args=(x,)) for x in xs]
        for t in ts:
            t.start()
        go.wait()
        time.sleep(0.01)
        alloc.close()
        for t in ts:
            t.join()
        assert alloc.closed and all(x.closed for x in xs)
