"""What a user reads and types around the binaries, checked against the
binaries themselves: the man pages (perfd(8), perfctl(1), perfd.conf(5)),
the example /etc/perfd/perfd.conf, bash and zsh completion, --version.

None of it needs root or BPF: the Debian package's build runs this file
(debian/rules' dh_auto_test, `make check-docs`).  The binaries and man pages
are $PERFD_BUILD's (default build/), built by `make all man`.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PERFD_BUILD") or REPO / "build")
PERFD = str(BUILD / "perfd")
PERFCTL = str(BUILD / "perfctl")
MAN_SRC = REPO / "docs" / "man"
EXAMPLE_CONF = REPO / "packaging" / "perfd.conf"
COMPLETION = REPO / "packaging" / "completion"
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")
# An option's name in a usage text or a man page: --long-name or -x.
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*[a-z]|-[a-zA-Z])(?![\w-])")


def run(*argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, **kw)


def changelog_version():
    first = (REPO / "packaging" / "debian" / "changelog").read_text().splitlines()[0]
    return re.match(r"perfd \(([^)]+)\)", first).group(1)


def man_section(name, heading):
    """The text of one '# HEADING' section of docs/man/NAME.scd."""
    text = (MAN_SRC / f"{name}.scd").read_text()
    m = re.search(rf"^# {heading}\n(.*?)(?=^# |\Z)", text, re.M | re.S)
    assert m, f"{name}.scd has no '# {heading}' section"
    return m.group(1)


def test_version_is_the_changelogs():
    """Both programs print the package's version, with `git describe`
    after it when built in a checkout ("0.1.0+g64df387")."""
    want = changelog_version()
    for prog, path in (("perfd", PERFD), ("perfctl", PERFCTL)):
        r = run(path, "--version")
        assert r.returncode == 0, r.stderr
        m = re.fullmatch(rf"{prog} (\S+)\n", r.stdout)
        assert m, f"{prog} --version printed {r.stdout!r}"
        assert m.group(1) == want or m.group(1).startswith(want + "+g"), \
            f"{prog} --version says {m.group(1)}, the changelog {want}"


def test_perfd_man_page_lists_exactly_perfd_help_options():
    r = run(PERFD, "--help")
    assert r.returncode == 0, r.stderr
    in_help = set(OPTION.findall(r.stdout))
    in_man = set(re.findall(r"^\*(--[a-z-]+)\*", man_section("perfd.8", "OPTIONS"), re.M))
    assert in_help - in_man == set(), f"in perfd --help, not in perfd(8): {sorted(in_help - in_man)}"
    assert in_man - in_help == set(), f"in perfd(8), not in perfd --help: {sorted(in_man - in_help)}"


def perfctl_commands():
    """The commands `perfctl --help` lists (its "Commands:" block)."""
    text = run(PERFCTL, "--help").stdout
    block = text.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0] for line in block.splitlines() if line.strip()}


def accepted_by_perfctl(option):
    """Whether some perfctl command takes OPTION: its answer is anything
    but 'unknown option' (no daemon is asked: the socket does not exist)."""
    tries = [[option]]  # a global option: before any command
    for command in sorted(perfctl_commands() - {"help"}):
        # top draws a screen unless -b
        batch = ["-b", "-n", "1"] if command == "top" else []
        tries += [[command, option, *batch], [command, option, "1", *batch]]
    for argv in tries:
        r = run(PERFCTL, "--socket", "/nonexistent/perfd.sock", *argv, stdin=subprocess.DEVNULL)
        if "unknown option" not in r.stderr and "needs a value" not in r.stderr:
            return True
    return False


def test_perfctl_man_page_matches_its_usage():
    """Every option of perfctl's usage is in perfctl(1), and every option
    perfctl(1) names is one perfctl takes."""
    in_usage = set()
    # the overview's global options, then each command's own help
    for argv in [["help"]] + [[c, "--help"] for c in sorted(perfctl_commands() - {"help"})]:
        r = run(PERFCTL, *argv)
        assert r.returncode == 0, f"perfctl {' '.join(argv)}: {r.stderr}"
        in_usage |= set(OPTION.findall(r.stdout))
    assert "--duration" in in_usage and "--kind" in in_usage, "the commands' help was not read"
    text = (MAN_SRC / "perfctl.1.scd").read_text()
    in_man = set(OPTION.findall(re.sub(r"^;.*$", "", text, flags=re.M)))
    assert in_usage - in_man == set(), f"in perfctl's usage, not in perfctl(1): {sorted(in_usage - in_man)}"
    refused = sorted(o for o in in_man if not accepted_by_perfctl(o))
    assert refused == [], f"perfctl(1) names options perfctl does not take: {refused}"


@pytest.mark.parametrize("page", ["perfd.8", "perfctl.1", "perfd.conf.5"])
def test_man_page_renders_without_warnings(page):
    path = BUILD / "man" / page
    assert path.exists(), f"{path} is not built (make man)"
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    r = run("man", "--warnings", "-l", str(path), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", f"man --warnings -l {page}:\n{r.stderr}"
    text = re.sub(r".\x08", "", r.stdout)  # bold and underline by overstriking
    name = page.rsplit(".", 1)[0]
    assert re.search(rf"^NAME\n\s+{re.escape(name)} - ", text, re.M), text[:500]


def config_file_options():
    """The options config.c's table lets the file set: every row but the
    command line's own (--config, --help, --version, R_CMDLINE rows)."""
    src = (REPO / "daemon" / "config.c").read_text()
    table = src[src.index("static const struct row rows[] = {"):]
    table = table[:table.index("\n};")]
    names = []
    for m in re.finditer(r'\{\s*"([a-z-]+)",[^}]*?\}', table, re.S):
        row = m.group(0)
        if "R_CMDLINE" in row or re.search(r"T_(CONFIG|HELP|VERSION)", row):
            continue
        names.append(m.group(1))
    macro = src[src.index("#define HTTP_ROWS"):]
    macro = macro[:macro.index("\n\n")]
    suffixes = re.findall(r'\{ prefix "(-[a-z-]+)"', macro)
    for prefix in re.findall(r'HTTP_ROWS\("([a-z]+)"', table):
        names += [prefix + s for s in suffixes]
    return names


def test_example_config_names_every_option():
    names = config_file_options()
    assert len(names) > 30 and "frequency" in names and "otlp-timeout" in names, names
    text = EXAMPLE_CONF.read_text()
    listed = re.findall(r"^#([a-z][a-z-]*) = \S", text, re.M)
    assert sorted(set(names) - set(listed)) == [], "options missing from packaging/perfd.conf"
    assert sorted(set(listed) - set(names)) == [], "packaging/perfd.conf names unknown options"
    assert len(listed) == len(set(listed)), "an option is listed twice"
    # every option is commented out: the file as installed changes nothing
    assert not re.search(r"^[a-z]", text, re.M)


# The completion asks the perfctl it completes for its options: this
# build's, first on the PATH.
PATH_ENV = {**os.environ, "PATH": f"{BUILD}:{os.environ.get('PATH', '')}"}


def bash(script):
    return run("bash", "--norc", "--noprofile", "-c",
               f"source {BASH_COMPLETION}; source {COMPLETION / 'perfctl.bash'}; {script}",
               env=PATH_ENV)


# Completes the words given, as bash does when Tab is pressed after them,
# and prints the candidates one a line.
COMPLETE = r'''
comp() {
	COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
	COMPREPLY=(); _perfctl; printf '%s\n' "${COMPREPLY[@]}"
}
'''


def completions(*words):
    r = bash(COMPLETE + "comp " + " ".join(f"'{w}'" for w in words))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


@pytest.mark.skipif(not BASH_COMPLETION.exists(), reason="bash-completion is not installed")
def test_bash_completion_is_registered():
    r = bash("complete -p perfctl")
    assert r.stdout.strip() == "complete -F _perfctl perfctl", r.stdout + r.stderr


@pytest.mark.skipif(not BASH_COMPLETION.exists(), reason="bash-completion is not installed")
def test_bash_completes_commands_options_values_and_live_pids():
    # every command perfctl has, and no other: a new command must be taught
    # to the completion
    assert set(completions("perfctl", "")) == perfctl_commands()
    assert "record" in perfctl_commands()
    assert completions("perfctl", "sn") == ["snapshot"]
    assert completions("perfctl", "--socket", "/x", "snapshot", "--no") == ["--no-lines"]
    assert set(completions("perfctl", "snapshot", "--kind", "")) == {"cpu", "memory", "offcpu", "wall"}
    assert set(completions("perfctl", "snapshot", "--format", "")) == \
        {"folded", "json", "pprof", "speedscope", "html", "svg"}
    assert set(completions("perfctl", "diff", "--format", "")) == {"text", "html", "svg"}
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        pid = str(sleeper.pid)
        assert pid in completions("perfctl", "snapshot", "--pid", pid[:-1])
        assert pid in completions("perfctl", "mem", "--pid", "")
        assert "sleep" in completions("perfctl", "report", "--comm", "sle")
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(not Path("/usr/bin/zsh").exists(), reason="zsh is not installed")
def test_zsh_completion_is_registered():
    """compinit finds _perfctl on the fpath and binds it to both programs."""
    r = run("zsh", "-f", "-c",
            f"fpath=({COMPLETION} $fpath); autoload -U compinit; compinit -u -D; "
            "print -r -- $_comps[perfctl] $_comps[perfd]")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["_perfctl", "_perfctl"], r.stdout + r.stderr


# Types WORDS and Tab into an interactive zsh (in a pseudo-terminal) whose
# fpath holds our completion, then Ctrl-E and " END": prints what the
# terminal showed, the completed line and any listing.
ZSH_TAB = r'''
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; setopt nobeep; print RE''ADY"
zpty -r z out '*READY*'
zpty -w -n z "$2"$'\t'
sleep 1
zpty -w -n z $'\x05 EN''D\n'
zpty -r z out '*END*'
print -r -- "$out"
zpty -d z
'''


def zsh_tab(words):
    r = run("zsh", "-f", "-c", ZSH_TAB, "zsh", str(COMPLETION), words, env=PATH_ENV)
    assert r.returncode == 0, r.stderr
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.stdout)
    return re.sub(r"[^\n]\x08", "", text.replace("\r", ""))


@pytest.mark.skipif(not Path("/usr/bin/zsh").exists(), reason="zsh is not installed")
def test_zsh_completes_commands_options_and_values():
    assert "perfctl snapshot" in zsh_tab("perfctl sn")
    assert "perfctl record" in zsh_tab("perfctl rec")
    assert "perfctl snapshot --kind offcpu" in zsh_tab("perfctl snapshot --kind of")
    assert "perfctl diff --format svg" in zsh_tab("perfctl diff --format sv")
    listing = zsh_tab("perfctl top --so")
    assert "--socket" in listing and "--sort" in listing, listing


def complete_options(command):
    """The options perfctl's table for COMMAND holds, as `perfctl
    --complete-options COMMAND` lists them (what the completion asks)."""
    r = run(PERFCTL, "--complete-options", command)
    assert r.returncode == 0, r.stderr
    return {word.rstrip("=") for line in r.stdout.splitlines() for word in line.split()}


@pytest.mark.skipif(not BASH_COMPLETION.exists() or not Path("/usr/bin/zsh").exists(),
                    reason="bash-completion or zsh is not installed")
def test_completion_offers_each_commands_options_from_its_own_table():
    """For every command, bash and zsh offer after `perfctl COMMAND -`
    exactly the options of the getopt table perfctl parses it with (no
    hand-kept copy to drift: the completion asks perfctl), and every option
    `perfctl COMMAND --help` names is among them."""
    for command in sorted(perfctl_commands() - {"help"}):
        table = complete_options(command)
        assert {"--json", "--socket", "--help", "-h"} <= table, (command, table)
        helped = set(OPTION.findall(run(PERFCTL, command, "--help").stdout))
        assert helped <= table, f"{command} --help names {sorted(helped - table)}, not parsed"
        bash_offers = set(completions("perfctl", command, "-"))
        assert bash_offers == table, \
            f"bash, {command}: missing {sorted(table - bash_offers)}, extra {sorted(bash_offers - table)}"
        shown = zsh_tab(f"perfctl {command} -")
        listing = shown.split(f"> perfctl {command} -\n")[-1].split(f"perfctl {command} - END")[0]
        zsh_offers = set(OPTION.findall(listing))
        assert zsh_offers == table, \
            f"zsh, {command}: missing {sorted(table - zsh_offers)}, extra {sorted(zsh_offers - table)}"


def test_readme_and_man_page_name_the_kinds_perfctl_takes():
    """The value kinds are perfctl's (include/perfd/kinds.h, in its usage
    text); the README's usage lines and perfctl(1)'s KIND are written by
    hand, so a kind added or renamed there must be here too."""
    r = run(PERFCTL, "snapshot", "--help")
    m = re.search(r"--kind ([a-z|]+)\]", r.stdout)
    assert m, f"perfctl snapshot --help names no kinds: {r.stdout!r}"
    kinds = m.group(1).split("|")
    readme = (REPO / "README.md").read_text()
    lists = re.findall(r"--kind ([a-z]+(?:\|[a-z]+)+)", readme)
    assert lists, "the README's usage names no kinds"
    for listed in lists:
        assert listed.split("|") == kinds, f"README says --kind {listed}, perfctl {'|'.join(kinds)}"
    text = (MAN_SRC / "perfctl.1.scd").read_text()
    m = re.search(r"_KIND_ is ([a-z, ]+?) or ([a-z]+);", text)
    assert m, "perfctl.1.scd does not say what a _KIND_ is"
    assert [k.strip() for k in m.group(1).split(",")] + [m.group(2)] == kinds
