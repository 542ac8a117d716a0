"""The environment is the one ./setup.sh makes: every package it pins is
installed at that version (tests that importorskip an optional package would
otherwise skip quietly on a machine where setup missed it), and its pins
agree with constraints.txt, which fixes everything they pull in."""
import importlib.metadata as md
import platform
import re
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def setup_pins():
    """{package: version} of setup.sh's `install name==version` lines, with
    whether the line is for x86-64 only."""
    pins, x86_only = {}, False
    for line in (ROOT / "setup.sh").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("if [[ $(uname -m) == x86_64 ]]"):
            x86_only = True
        elif line == "fi":
            x86_only = False
        elif line.startswith("install "):
            for name, version in re.findall(r"([A-Za-z0-9_.-]+)==([\w.+]+)", line):
                pins[canonical(name)] = (version, x86_only)
    return pins


def constraints():
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            out[canonical(name)] = version
    return out


def test_setup_pins_are_installed():
    pins = setup_pins()
    assert {"numpy", "xla-cpu-pjrt", "pytest", "expecttest", "transformers"} <= set(pins), pins
    wrong = {}
    for name, (version, x86_only) in pins.items():
        if x86_only and platform.machine() != "x86_64":
            continue
        try:
            have = md.version(name)
        except md.PackageNotFoundError:
            have = None
        if have != version:
            wrong[name] = f"pinned {version}, installed {have}"
    assert not wrong, f"run ./setup.sh: {wrong}"


def test_constraints_agree_with_setup():
    pins, fixed = setup_pins(), constraints()
    assert "torch" not in fixed  # torch is TORCH_VERSION's, so another build can be chosen
    differ = {n: (v, fixed.get(n)) for n, (v, _) in pins.items() if fixed.get(n) != v}
    assert not differ, f"setup.sh pin vs constraints.txt: {differ}"
