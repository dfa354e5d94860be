"""The layering ARCHITECTURE.md describes, checked on the tree: which of
daemon/'s folders may include which.  Each rule is one sentence of that
file; a change that breaks one either moves code to where it belongs or
changes the sentence and this table together.

Read from the sources alone: no build, no root.
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAEMON = REPO / "daemon"
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

# folder -> what its files may include besides their own folder's headers:
# folders of daemon/, "perfd" (include/perfd/), and the generated code
# ("gen", "opentelemetry", "profile.pb-c.h").
ALLOWED = {
    # what every layer uses depends on nothing of perfd but the shared headers
    "base": {"perfd"},
    # the profile store and the model know processes, not how a binary is
    # read: modules are named through process/modules.h's registry
    "profile": {"perfd", "base", "process"},
    # the analysis (report, diff, diagnose, top) is linked into perfctl
    # too: it knows its own profile model, never the daemon's
    "analysis": {"perfd", "base"},
    # an encoder reads the model and nothing else of the daemon
    "encode": {"perfd", "base", "profile", "gen", "opentelemetry", "profile.pb-c.h"},
}
# No folder below the protocol includes it: api/ is on top of them all,
# but for manager.c, which makes everything.  "core" is daemon/'s own
# daemon.{c,h} and rates.{c,h}.
BELOW_API = ("base", "analysis", "process", "symbols", "unwind", "interp", "profile", "encode",
             "collect", "state", "export", "core")
CORE = ("daemon.c", "daemon.h", "rates.c", "rates.h")


def includes(folder):
    paths = ([DAEMON / name for name in CORE] if folder == "core"
             else sorted((DAEMON / folder).rglob("*.[ch]")))
    for path in paths:
        for name in INCLUDE.findall(path.read_text()):
            yield path.relative_to(REPO), name


def top(name):
    return name.split("/", 1)[0] if "/" in name else name


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_a_folder_includes_only_what_lies_below_it(folder):
    wrong = [f"{path}: {name}" for path, name in includes(folder)
             if top(name) != folder and top(name) not in ALLOWED[folder]]
    assert not wrong, "\n".join(wrong)


def test_nothing_below_the_protocol_includes_it():
    wrong = [f"{path}: {name}" for folder in BELOW_API for path, name in includes(folder)
             if top(name) == "api"]
    assert not wrong, "\n".join(wrong)


def test_the_rules_see_the_tree():
    """The table names folders that exist and files that include things:
    a rename would otherwise leave every rule above passing on nothing."""
    for folder in (set(ALLOWED) | set(BELOW_API)) - {"core"}:
        assert (DAEMON / folder).is_dir(), folder
    for name in CORE:
        assert (DAEMON / name).is_file(), name
    assert any(top(n) == "process" for _, n in includes("profile"))
    assert any(top(n) == "profile" for _, n in includes("encode"))
    assert any(top(n) == "base" for _, n in includes("analysis"))
