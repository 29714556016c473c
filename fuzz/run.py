"""Run the fuzz targets: ``python fuzz/run.py [TARGET ...] [--time SECONDS] [--engine ...]``.

Engines:

* ``atheris`` (coverage-guided, libFuzzer): mcpkit is instrumented on import; new inputs go to
  ``.fuzz/<target>/corpus`` (the committed seeds in ``fuzz/corpus/<target>`` are read, never
  written), crashes to ``.fuzz/<target>/crash-*``. Its ``cov:``/``ft:`` counts are reported.
* ``hypothesis`` (property-based, structured inputs): the target's strategy, example after
  example, for the time given. Used where atheris does not install.

``--coverage`` then replays the seeds, everything atheris kept and 300 derandomized hypothesis
examples under coverage.py, and prints the line coverage of the modules each target is about.
The exit status is 1 when a target found a crash (its input and traceback are printed), else 0.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from fuzz import TARGETS  # noqa: E402

WORK = ROOT / ".fuzz"


def _has_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def run_atheris(name: str, seconds: int) -> bool:
    """One libFuzzer run in a child process; True when it found nothing."""
    work = WORK / name
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    seeds = ROOT / "fuzz" / "corpus" / name
    seeds.mkdir(parents=True, exist_ok=True)
    args = [
        sys.executable,
        __file__,
        "--atheris-child",
        name,
        str(work / "corpus"),
        str(seeds),
        f"-max_total_time={seconds}",
        "-timeout=20",
        "-rss_limit_mb=2048",
        "-max_len=4096",
        f"-artifact_prefix={work}/",
        "-print_final_stats=1",
    ]
    log = work / "atheris.log"
    with log.open("w") as out:
        code = subprocess.call(args, stdout=out, stderr=subprocess.STDOUT)
    text = log.read_text(errors="replace")
    stats = [line for line in text.splitlines() if line.startswith("#") and "cov:" in line]
    final = [line for line in text.splitlines() if line.startswith("stat::")]
    print(f"[{name}] atheris {seconds}s: {stats[-1] if stats else 'no progress line'}")
    for line in final:
        if "number_of_executed_units" in line or "peak_rss_mb" in line:
            print(f"[{name}]   {line}")
    if code != 0:
        print(f"[{name}] FOUND A CRASH (exit {code}); log {log}:")
        print("\n".join(text.splitlines()[-60:]))
        return False
    return True


def _atheris_child(name: str, libfuzzer_args: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["mcpkit"]):
        module = importlib.import_module(f"fuzz.{name}")
    atheris.Setup([sys.argv[0], *libfuzzer_args], module.TARGET.one_input)
    atheris.Fuzz()


def run_hypothesis(name: str, seconds: int) -> bool:
    """Batches of hypothesis examples until the time is up; True when it found nothing."""
    from hypothesis import HealthCheck, given, settings

    target = importlib.import_module(f"fuzz.{name}").TARGET
    deadline = time.monotonic() + seconds
    examples = 0
    found: list[bytes] = []

    @settings(max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(target.strategy)
    def batch(data: bytes) -> None:
        nonlocal examples
        examples += 1
        try:
            target.one_input(data)
        except Exception:
            found.append(data)
            raise

    while time.monotonic() < deadline:
        try:
            batch()
        except Exception as exc:  # a finding: shrunk by hypothesis; report it and stop
            print(f"[{name}] FOUND: {type(exc).__name__}: {exc}")
            if found:
                _save(name, found[-1])
            return False
    print(f"[{name}] hypothesis {seconds}s: {examples} examples, nothing found")
    return True


def _save(name: str, data: bytes) -> None:
    folder = WORK / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"crash-{int(time.time())}"
    path.write_bytes(data)
    print(f"[{name}] input saved to {path}")


def _examples_under_coverage(target: object, count: int = 300) -> int:
    """A fixed, derandomized set of hypothesis examples (what atheris's byte mutations rarely build)."""
    from hypothesis import HealthCheck, given, settings

    seen = 0

    @settings(max_examples=count, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(target.strategy)  # type: ignore[attr-defined]
    def replay(data: bytes) -> None:
        nonlocal seen
        seen += 1
        target.one_input(data)  # type: ignore[attr-defined]

    try:
        replay()
    except Exception as exc:
        print(f"[{target.name}] a generated example fails under coverage: {type(exc).__name__}: {exc}")  # type: ignore[attr-defined]
    return seen


def report_coverage(names: list[str]) -> None:
    """Replay seeds and found inputs under coverage.py; print line coverage per module."""
    import coverage

    cov = coverage.Coverage(data_file=None, branch=False)
    cov.start()
    targets = {}
    for name in names:
        module = importlib.import_module(f"fuzz.{name}")
        targets[name] = module.TARGET
    replayed = {}
    for name, target in targets.items():
        inputs = [
            p
            for d in (ROOT / "fuzz" / "corpus" / name, WORK / name / "corpus")
            if d.is_dir()
            for p in d.iterdir()
        ]
        for path in inputs:
            try:
                target.one_input(path.read_bytes())
            except Exception as exc:
                print(f"[{name}] replaying {path} fails: {type(exc).__name__}: {exc}")
        replayed[name] = len(inputs) + _examples_under_coverage(target)
    cov.stop()
    for name, target in targets.items():
        files = []
        for module_name in target.modules:
            module = sys.modules.get(module_name)
            if module is not None and module.__file__:
                files.append(module.__file__)
        total = hit = 0
        for file in files:
            _, statements, _, missing, _ = cov.analysis2(file)
            total += len(statements)
            hit += len(statements) - len(missing)
        share = 100.0 * hit / total if total else 0.0
        where = ", ".join(target.modules)
        print(f"[{name}] coverage over {replayed[name]} inputs: {share:.1f}% of {total} lines in {where}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--atheris-child":
        _atheris_child(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--coverage-child":
        report_coverage(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("targets", nargs="*", help=f"targets (default: all): {', '.join(TARGETS)}")
    parser.add_argument("--time", type=int, default=60, help="seconds per target (default 60)")
    parser.add_argument("--engine", choices=["auto", "atheris", "hypothesis", "both"], default="auto")
    parser.add_argument("--coverage", action="store_true", help="replay the corpus under coverage.py")
    options = parser.parse_args()
    names = options.targets or list(TARGETS)
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    engine = options.engine
    if engine == "auto":
        engine = "atheris" if _has_atheris() else "hypothesis"
        if engine == "hypothesis":
            print("atheris is not installed here: property-based runs only (pip install atheris)")
    os.environ.setdefault("MCPKIT_STATE_SECRET", "fuzz")
    ok = True
    for name in names:
        if engine in ("atheris", "both"):
            ok = run_atheris(name, options.time) and ok
        if engine in ("hypothesis", "both"):
            ok = run_hypothesis(name, options.time) and ok
    if options.coverage:
        # In a fresh process, so that coverage sees mcpkit imported (its module-level lines too).
        subprocess.call([sys.executable, __file__, "--coverage-child", *names])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
