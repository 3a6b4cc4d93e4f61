"""Where the default test tier's time goes: XLA compiling, lowering and tracing against the rest.

A pytest plugin and its table.  Run the tier with it (from the repository root):

    PYTHONPATH=benchmarks BAYES_EVAL_TIER_PROFILE=/tmp/tier_profile pytest -p tier_profile

Every worker writes one JSON file to that folder: per test, its wall time and the seconds of each of
JAX's duration events (``jax.monitoring``: ``/jax/core/compile/backend_compile_duration`` the XLA
compile, ``jaxpr_to_mlir_module_duration`` the lowering, ``jaxpr_trace_duration`` the tracing, the
persistent cache's retrievals).  Then

    python benchmarks/tier_profile.py /tmp/tier_profile

prints the sums, the test files by wall time with each file's compile and trace + lower seconds, and
the programs (JAX's function names) by XLA compile seconds, with how often each was compiled.
Stop 78 (two workers, 2 cores): 1,368 s of test time, of it 704 s XLA compile, 158 s lowering and
99 s tracing -- about 70%, as at stops 58-70 (README, the test tier's history).  Stop 79, by
program (the listener's ``fun_name``; 617 s run, 6,760 compiles of 150 programs, 617 s of XLA):
the simulations' ``run`` 148 s over 66 compiles, the session posterior's ``all_measures`` 59 s / 16,
the session's AIS ``step`` 54 s / 69, the simulation posterior's ``<lambda>`` 41 s / 29, the
session's ``est`` 37 s / 119; single operations run outside ``jit`` (``jit(multiply)`` and the
like, each ~25 ms) 155 s over 6,217 compiles -- spread over dozens of call sites, none above 5 s.
"""
import collections
import json
import os
import sys
import time

import pytest

COMPILE = "/jax/core/compile/backend_compile_duration"
_events = collections.Counter()
_per_test = {}
#: XLA compile seconds and count per program name (JAX's ``fun_name``), over the whole worker
_programs = collections.defaultdict(lambda: [0.0, 0])


def _listener(event, duration, fun_name=None, **_):
    _events[event] += duration
    if event == COMPILE:
        _programs[fun_name or "?"][0] += duration
        _programs[fun_name or "?"][1] += 1


def pytest_configure(config):
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listener)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's events (setup, call and teardown together) and wall time."""
    before, t0 = dict(_events), time.perf_counter()
    progs = {k: v[0] for k, v in _programs.items()}
    yield
    row = {k: v - before.get(k, 0.0) for k, v in _events.items() if v - before.get(k, 0.0) > 0}
    row["wall"] = time.perf_counter() - t0
    row["programs"] = {k: v[0] - progs.get(k, 0.0) for k, v in _programs.items() if v[0] - progs.get(k, 0.0) > 0.2}
    _per_test[item.nodeid] = row


def pytest_sessionfinish(session):
    folder = os.environ.get("BAYES_EVAL_TIER_PROFILE")
    if folder and _per_test:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
            json.dump(_per_test, f)
        with open(os.path.join(folder, f"{os.getpid()}.programs"), "w") as f:
            json.dump(dict(_programs), f)


LOWER = ("/jax/core/compile/jaxpr_to_mlir_module_duration", "/jax/core/compile/jaxpr_trace_duration")


def table(folder: str, top: int = 25) -> str:
    """The sums over every test, then the ``top`` test files by wall time."""
    per = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                per.update(json.load(f))
    if not per:
        raise SystemExit(f"no profile in {folder}: run the tier with -p tier_profile and BAYES_EVAL_TIER_PROFILE={folder}")
    total = collections.Counter()
    files = collections.defaultdict(collections.Counter)
    for test, row in per.items():
        total.update({k: v for k, v in row.items() if k != "programs"})
        f = files[test.split("::")[0]]
        f["wall"] += row.get("wall", 0.0)
        f["compile"] += row.get(COMPILE, 0.0)
        f["lower"] += sum(row.get(k, 0.0) for k in LOWER)
    lines = [f"{len(per)} tests, {total['wall']:.0f} s of test time", ""]
    lines += [f"{v:9.1f} s  {k}" for k, v in total.most_common() if k != "wall"]
    lines += ["", "| test file | wall (s) | XLA compile (s) | trace + lower (s) |", "|---|---|---|---|"]
    for name, c in sorted(files.items(), key=lambda kv: -kv[1]["wall"])[:top]:
        lines.append(f"| {name} | {c['wall']:.1f} | {c['compile']:.1f} | {c['lower']:.1f} |")
    lines += ["", "| slowest tests | wall (s) | programs compiled in it (XLA s; over 0.2 s) |", "|---|---|---|"]
    for test, row in sorted(per.items(), key=lambda kv: -kv[1].get("wall", 0.0))[:top // 2]:
        progs = sorted(row.get("programs", {}).items(), key=lambda kv: -kv[1])[:4]
        lines.append(f"| {test} | {row['wall']:.1f} | {', '.join(f'{k} {v:.1f}' for k, v in progs)} |")
    programs = collections.defaultdict(lambda: [0.0, 0])
    for name in sorted(os.listdir(folder)):
        if name.endswith(".programs"):
            with open(os.path.join(folder, name)) as f:
                for prog, (sec, n) in json.load(f).items():
                    programs[prog][0] += sec
                    programs[prog][1] += n
    if programs:
        lines += ["", "| program | XLA compile (s) | compiles |", "|---|---|---|"]
        for prog, (sec, n) in sorted(programs.items(), key=lambda kv: -kv[1][0])[:top]:
            lines.append(f"| {prog} | {sec:.1f} | {n} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python benchmarks/tier_profile.py FOLDER (written by pytest -p tier_profile)")
    print(table(sys.argv[1]))
