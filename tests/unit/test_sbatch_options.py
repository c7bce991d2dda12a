"""A user's sbatch options never set what hpcbench keeps: the job's name, output,
time, deadline and the like, however they are spelled (a long name's prefix, a short
option with its value attached, quotes, two #SBATCH lines that make one option).

The reading of options is checked against glibc's own getopt_long, called with
sbatch's option table (hpcbench.launchers.sbatch_options.LONG, from Slurm 22.05.8's
slurm_opt.c), on generated lines.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.launchers import sbatch_options
from hpcbench.launchers.sbatch_options import LONG, OWNED, SHORT, owned_problem, resolved, words

REFUSED = [
    ["--job-name=mine"],
    ["--job=mine"],  # a unique prefix
    ["-Jmine"],  # a short option, its value attached
    ["-J mine"],
    ["-J", "-mine"],  # two #SBATCH lines, one option (its value starts with a dash)
    ['--exclusive "--job-name"=mine'],  # sbatch takes the quotes away
    ["--exclusive --job-name=mine"],  # two options on one line
    ["--mem=0 -vJmine"],  # a cluster of short options
    ["--deadline=now+1000days"],
    ["--dead=now+1000days"],
    ["--output=/tmp/x"],
    ["-o /tmp/x"],
    ["--error=/tmp/x"],
    ["-e/tmp/x"],
    ["--open-mode=append"],
    ["--parsable"],
    ["--pars"],
    ["--test-only"],
    ["--wait"],
    ["-W"],
    ["--wrap=true"],
    ["--array=1-4"],
    ["-a1-4"],
    ["--dependency=afterany:1"],
    ["-dafterany:1"],
    ["--hold"],
    ["-H"],
    ["--begin=now+1hour"],
    ["--requeue"],
    ["--signal=B:USR1@60"],
    ["--time=5"],
    ["-t5"],
    ["--time-min=1"],
    ["--export=NONE"],
    ["--get-user-env"],
    ["--clusters=other"],
    ["-M other"],
    ["--partition=other"],
    ["-pother"],
    ["--account=other"],
    ["--qos=other"],
    ["--gres=gpu:8"],
    ["--nodelist=node9"],
    ["-wnode9"],
    ["--nodes=9"],
    ["-N9"],
    ["--ntasks=9"],
    ["--ntasks-per-node=9"],
    ["--tasks-per-node=9"],
    ["--cpus-per-task=9"],
    ["-c9"],
    ["--uid=0"],
    ["--help"],
]
# Options sbatch itself would refuse: ambiguous, unknown letters, a word that is no
# option (sbatch stops there: "Invalid directive"), a missing value, a separator.
UNREADABLE = [
    (["--no"], "ambiguous"),
    (["--o=x"], "ambiguous"),
    (["-1"], "no option -1"),
    (["--exclusive user"], "not an option"),
    (["--comment"], "needs a value"),
    (["--parsable=yes"], "takes no value"),
    (["--exclusive hetjob"], "heterogeneous"),
    (["--comment :x"], "':'"),
    (["--comment 'x"], "unmatched"),
]
ACCEPTED = [
    ["--exclusive"],
    ["--mem=0"],
    ["--exclusive", "--mem=0"],
    ["--constraint=a100"],
    ["-C a100"],  # a short option's value as the next word
    ["--comment", "--job-name=x"],  # the next line's word is --comment's value
    ["-kJ"],  # --no-kill's optional value, attached: J is not an option here
    ["--mail-type=END --mail-user=me@example.org"],
    ["--chdir=/tmp"],
    ["--gpus-per-node=1"],
    ["--tres-per-task=gres/gpu:1"],  # a later Slurm's option: the cluster says
]


def cli_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("texts", REFUSED, ids=lambda t: " | ".join(t))
def test_an_option_hpcbench_keeps_is_refused_in_one_line(texts, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--dry-run", "--out", str(out)]
    code, err = cli_error(argv + [f"--sbatch={t}" for t in texts], capsys)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("hpcbench: error: --sbatch: ") and "is hpcbench's to set" in err[0]
    assert not out.exists()


@pytest.mark.parametrize("texts", REFUSED[:8] + REFUSED[-8:], ids=lambda t: " | ".join(t))
def test_a_campaign_partitions_sbatch_key_is_refused_as_scale_refuses_it(texts, tmp_path, capsys):
    out = tmp_path / "out"
    campaign = {
        "name": "c",
        "out": str(out),
        "sweep": {"model": "resnet18", "batch": [8], "nodes": [1]},
        "testbeds": [{"name": "p", "slurm": {"partition": "gpu", "sbatch": texts}}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(campaign))
    for command in (["campaign", "plan", str(path)], ["campaign", "run", "--dry-run", str(path)]):
        code, err = cli_error(command, capsys)
        assert code == 2 and len(err) == 1, err
        assert "testbeds[0]" in err[0] and "sbatch" in err[0], err
        assert "is hpcbench's to set" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(("texts", "why"), UNREADABLE, ids=lambda t: str(t))
def test_lines_sbatch_would_refuse_are_refused_here(texts, why, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--dry-run", "--out", str(out)]
    code, err = cli_error(argv + [f"--sbatch={t}" for t in texts], capsys)
    assert code == 2 and len(err) == 1 and why in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("texts", ACCEPTED, ids=lambda t: " | ".join(t))
def test_site_options_go_in_verbatim(texts, tmp_path, capsys):
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--no-probe", "--dry-run"]
    code = cli.main(argv + ["--out", str(tmp_path / "out")] + [f"--sbatch={t}" for t in texts])
    printed = capsys.readouterr().out
    assert code == 0
    for text in texts:
        assert f"#SBATCH {text}\n" in printed


@pytest.mark.parametrize(
    ("var", "flags"),
    [
        ("SBATCH_JOB_NAME", []),
        ("SBATCH_TIMELIMIT", []),
        ("SBATCH_OUTPUT", []),
        ("SBATCH_EXPORT", []),
        ("SBATCH_PARTITION", ["--partition", "gpu"]),
    ],
)
def test_an_sbatch_variable_that_would_override_hpcbench_is_refused(
    var, flags, tmp_path, capsys, monkeypatch
):
    """sbatch reads SBATCH_* after the script's #SBATCH lines (opt.c:380-392), and
    sbatch on this machine gets them (launchers.base: SBATCH_ is passed on)."""
    monkeypatch.setenv(var, "x")
    out = tmp_path / "out"
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--dry-run", "--out", str(out), *flags]
    code, err = cli_error(argv, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(f"hpcbench: error: {var} is set")
    assert not out.exists()


def test_a_default_hpcbench_does_not_set_may_come_from_sbatchs_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("SBATCH_PARTITION", "gpu")
    monkeypatch.setenv("SBATCH_ACCOUNT", "me")
    argv = ["scale", "--env", "slurm", "--nodes", "1", "--no-probe", "--dry-run"]
    assert cli.main(argv + ["--out", str(tmp_path / "out")]) == 0


def test_every_option_hpcbench_keeps_is_one_sbatch_has():
    assert set(OWNED) <= set(LONG)
    assert set(sbatch_options.ENV_OPTIONS.values()) <= set(OWNED)


def test_sbatch_line_words():
    assert words("--a=b  c") == ["--a=b", "c"]
    assert words('"--job-name"=x') == ["--job-name=x"]
    assert words("'a#b' c#d e") == ["a#b", "c"]  # an unquoted '#' ends the line
    assert words("a\\'b") == ["a'b"]
    assert words("'a\\'b'") == ["a'b"]  # a backslash escapes inside quotes too
    assert words("a\\ b") == ["a", "b"]  # but never joins words


# ------------------------------------------------------------ against glibc's getopt_long
class _Option(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("has_arg", ctypes.c_int),
        ("flag", ctypes.POINTER(ctypes.c_int)),
        ("val", ctypes.c_int),
    ]


LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
# What each option sets, as getopt_long returns it: the letter's code, or a number
# from 256 up shared by the long names that mean the same (slurm_opt.c's LONG_OPT_*).
_VALS = dict.fromkeys(val for _, val in LONG.values())
_CODES = {v: ord(v) if len(v) == 1 else 256 + i for i, v in enumerate(_VALS)}
_CODE = {name: _CODES[val] for name, (_, val) in LONG.items()}
_TABLE = (_Option * (len(LONG) + 1))(
    *[_Option(n.encode(), h, None, _CODES[v]) for n, (h, v) in LONG.items()], _Option()
)
_OPTSTRING = ("+" + "".join(c + ":" * h for c, h in SHORT.items())).encode()


def glibc(argv: list[str]) -> list[int] | None:
    """What getopt_long reads from sbatch's argv (as opt.c:_set_options calls it), or
    None where it stops at an error or before the last word (sbatch: "Invalid
    directive")."""
    encoded = [b"sbatch", *(w.encode() for w in argv)]
    args = (ctypes.c_char_p * (len(encoded) + 1))(*encoded, None)
    ctypes.c_int.in_dll(LIBC, "opterr").value = 0
    ctypes.c_int.in_dll(LIBC, "optind").value = 0  # glibc: 0 starts afresh
    found = []
    while True:
        code = LIBC.getopt_long(len(encoded), args, _OPTSTRING, _TABLE, None)
        if code == -1:
            break
        if code == ord("?"):
            return None
        found.append(code)
    return found if ctypes.c_int.in_dll(LIBC, "optind").value == len(encoded) else None


NAMES = sorted(LONG)
word = st.one_of(
    # a long option, whole or a prefix, with or without a value
    st.tuples(st.sampled_from(NAMES), st.integers(1, 30), st.sampled_from(["", "=v", "=-J"])).map(
        lambda t: "--" + t[0][: t[1]] + t[2]
    ),
    # short options, clustered, a value attached or not
    st.text(st.sampled_from(sorted(SHORT) + ["x", "1"]), min_size=1, max_size=3).map(
        lambda s: "-" + s
    ),
    st.sampled_from(["v", "-", "--", "-J"]),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(word, min_size=1, max_size=5))
def test_options_are_read_as_glibcs_getopt_long_reads_them(argv):
    """Whatever the words, hpcbench reads the options sbatch reads, or refuses them
    where sbatch would."""
    try:
        mine = [_CODE[name] for name, _ in resolved(argv)]
    except ValueError:
        mine = None
    assert mine == glibc(argv), argv


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["--exclusive", "--mem=0", "-C a100", "-v", "--comment=x"])),
    st.sampled_from(sorted(OWNED)),
    st.sampled_from(["long", "prefix", "short"]),
)
def test_an_option_hpcbench_keeps_is_refused_however_spelled(before, owned, form):
    has_arg, val = LONG[owned]
    if form == "short" and len(val) == 1:
        spelled = f"-{val}" + ("v" if has_arg else "")
    else:
        name = owned
        if form == "prefix":  # the shortest prefix getopt_long takes for it
            name = next(
                owned[:n]
                for n in range(1, len(owned) + 1)
                if {LONG[x] for x in LONG if x.startswith(owned[:n])} == {LONG[owned]}
                or owned[:n] == owned
            )
        spelled = f"--{name}" + ("=v" if has_arg else "")
    problem = owned_problem([*before, spelled])
    assert problem and "is hpcbench's to set" in problem, (before, spelled, problem)


def test_the_table_is_sbatchs(tmp_path: Path):
    """Spot checks against sbatch(1) of Slurm 22.05: short letters and values."""
    assert LONG["job-name"] == (1, "J") and LONG["exclusive"][0] == 2
    assert LONG["tasks-per-node"][1] == LONG["ntasks-per-node"][1]  # aliases
    assert SHORT["k"] == 2 and SHORT["H"] == 0 and SHORT["t"] == 1
