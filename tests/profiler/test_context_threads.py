"""profiler.context's thread timelines on CPU: a thread started while timelines are on gets one at
once, and it ends with the thread, so an id reused by a later (native) thread is not taken for it."""
import itertools
import threading

import pytest

from profiler import context


@pytest.fixture
def timelines():
    clock = itertools.count(1000)
    context.timelines_on(lambda: next(clock))
    try:
        yield clock
    finally:
        context.timelines_off()


def test_thread_timeline_starts_and_ends_with_the_thread(timelines):
    ident = []
    t = threading.Thread(target=lambda: ident.append(threading.get_ident() & context.TID_MASK))
    t.start()
    t.join()
    tid = ident[0]
    c = context._by_tid[tid]
    assert c.thread is t and c.nodes[0] == context.ROOT and c.nodes[-1] is context.ENDED
    during, after = c.times[0], c.times[-1] + 1
    main_node = context.push("main_scope")
    try:
        assert context.node_at(tid, during, {}) == context.ROOT               # its own node while alive
        assert context.node_at(tid, after + 10, {}) == main_node              # the id reused by a native thread
    finally:
        context.pop()


def test_registration_chains_and_restores_a_profile_function():
    calls = []

    def mine(frame, event, arg):
        calls.append(event)
    threading.setprofile(mine)
    try:
        context.timelines_on(lambda: 1)
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        context.timelines_off()
        assert calls and threading.getprofile() is mine
    finally:
        threading.setprofile(None)


def test_scope_entries_from_threads_share_the_trie_and_its_child_index(timelines):
    """profiler.scope's entry finds a child's id in its parent's dict (context._kids) instead of the (parent, name)
    key: both indexes agree after entries from several threads, the ids are the ones context.push gives, and each
    thread's timeline holds its own entries and exits."""
    import profiler
    seen = {}

    def work(k):
        with profiler.scope("outer"):
            with profiler.scope(f"inner{k % 2}"):
                seen[k] = context.current_node()
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for (parent, name), nid in context._ids.items():
        assert context._kids[parent][name] == nid
    assert sum(len(d) for d in context._kids) == len(context._ids) == len(context._names) - 1
    outer = context._ids[(context.ROOT, "outer")]
    assert {seen[k] for k in range(4)} == {context._ids[(outer, "inner0")], context._ids[(outer, "inner1")]}
    assert context.push("outer") == outer   # the same id as through context.push
    context.pop()
    c = context.local.ctx
    assert c.nodes[-2:] == [outer, context.ROOT] and c.node == context.ROOT
