"""What a campaign trusts when it resumes, and whose state and Docker names it takes.

A cell the journal calls measured is trusted only while its testbed's store holds a
run of it by the key `scale --resume` matches (the whole configuration and its
method); a state folder is used only when its owner marker names this campaign; a
local testbed's Docker objects are named after its campaign and testbed. Deploy,
verify, the sweep and destroy are tests/unit/test_campaign.py's fakes.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from hpcbench import cli
from hpcbench.campaign import campaign_file, runner, state, testbeds
from hpcbench.core import files
from hpcbench.core.errors import UsageError
from hpcbench.measure import sweep
from hpcbench.measure.store import CONFIG_FIELDS, RESULTS_FILE, Store
from hpcbench.testbeds.target import Target
from tests.unit.test_campaign import (
    BASE,
    Fakes,
    base,
    fake_run,
    resume_measures_b_again,
    write,
)
from tests.unit.test_hostile_records import _SETTINGS


def kept(path: Path) -> dict[str, set[str]]:
    """The cells `campaign run --resume` trusts, by testbed."""
    campaign = campaign_file.load(path)
    trusted = runner.Runner(campaign, io.StringIO()).still_measured({c.id for c in campaign.cells})
    return {tb.name: {c.id for c in tb.cells if c.id in trusted} for tb in campaign.testbeds}


def all_cells(path: Path) -> dict[str, set[str]]:
    return {tb.name: {c.id for c in tb.cells} for tb in campaign_file.load(path).testbeds}


# ------------------------------------------------------------ resume's trust
# Fields of a run's key other than the cell's own batch, nodes and workers.
OTHER_FIELDS = [f for f in CONFIG_FIELDS if f not in ("batch", "nodes", "workers")]
VALUES = st.one_of(
    st.sampled_from(["resnet50", "virtualwall", "torch", "/data/imagenet", "", "m"]),
    st.integers(-3, 2**40),
    st.text(max_size=30),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)


@settings(_SETTINGS, max_examples=40)
@given(changes=st.dictionaries(st.sampled_from(OTHER_FIELDS), VALUES, min_size=1))
def test_a_store_replaced_by_other_runs_at_the_same_cells_is_measured_again(
    tmp_path: Path, fakes: Fakes, changes: dict[str, Any]
) -> None:
    path = tmp_path / "c.yaml"
    if not path.exists():  # once per test, not per example: the measured campaign
        path = base(tmp_path)
        assert cli.main(["campaign", "run", str(path)]) == 0
        assert kept(path) == all_cells(path)  # the store as written: every cell trusted
        shutil.copy(tmp_path / "out" / "b" / RESULTS_FILE, tmp_path / "b-results")
    original = (tmp_path / "b-results").read_text().splitlines()
    runs = [json.loads(line) for line in original]
    if all(all(r.get(k) == v for k, v in changes.items()) for r in runs if r["kind"] == "run"):
        return  # nothing changed: no other runs
    replaced = [
        json.dumps({**r, **changes} if r["kind"] == "run" else r, allow_nan=False) for r in runs
    ]
    (tmp_path / "out" / "b" / RESULTS_FILE).write_text("\n".join(replaced) + "\n")
    trusted = kept(path)
    assert trusted["a"] == all_cells(path)["a"]
    assert trusted["b"] == set(), changes


def test_a_store_of_the_other_link_rate_is_not_this_testbeds(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)  # a at 1gbit, b at 100mbit; the same cells otherwise
    assert cli.main(["campaign", "run", str(path)]) == 0
    shutil.copy(tmp_path / "out" / "a" / RESULTS_FILE, tmp_path / "out" / "b" / RESULTS_FILE)
    err = resume_measures_b_again(path, fakes, capfd)
    assert "as this campaign measures it: measuring it again" in err


def test_a_link_rate_only_terraform_knows_leaves_the_cells_trusted(
    tmp_path: Path, fakes: Fakes
) -> None:
    # No link_rate in the settings: the deployment's default (the fakes' 1gbit).
    path = base(tmp_path, **{"testbeds.0.settings": {"node_count": 2}})
    assert cli.main(["campaign", "run", str(path)]) == 0
    fakes.calls.clear()
    assert cli.main(["campaign", "run", str(path), "--resume"]) == 0
    assert fakes.calls == []


def test_partitions_and_host_lists_match_the_key_scale_resolves(tmp_path: Path) -> None:
    path = base(
        tmp_path,
        testbeds=[
            {"name": "a", "slurm": {"partition": "p", "nodes": 2}},
            {"name": "b", "hosts": ["h1:1", "h2:1"]},
        ],
    )
    campaign = campaign_file.load(path)
    for tb in campaign.testbeds:  # each cell's run as `scale` writes it (the fakes' sweep)
        for part in tb.parts:
            target = Target.resolve(part.target)
            for cell in part.cells:
                Store(campaign.testbed_out(tb)).append(
                    {
                        **fake_run(tb.env, cell.batch, cell.nodes, cell.workers, 1),
                        **sweep.base_record(target, part.workload, 0, cell.config, 0),
                    }
                )
    assert kept(path) == all_cells(path)
    store = tmp_path / "out" / "b" / RESULTS_FILE
    runs = [json.loads(line) for line in store.read_text().splitlines()]
    store.write_text("".join(json.dumps({**r, "backend": "torch"}) + "\n" for r in runs))
    assert kept(path) == {"a": all_cells(path)["a"], "b": set()}


# ------------------------------------------------------------ state folders
def folder_of(campaign: campaign_file.Campaign, base_dir: Path) -> Path:
    """The campaign's state folder: its name and a digest of its out folder."""
    digest = hashlib.sha256(str(campaign.out.resolve()).encode()).hexdigest()[:8]
    return base_dir / "campaigns" / f"{campaign.name}-{digest}"


def named(tmp_path: Path, name: str, out: str, file: str) -> Path:
    data = yaml.safe_load(BASE.format(out=tmp_path / out))
    data["name"] = name
    return write(tmp_path, yaml.safe_dump(data), file)


def test_a_campaign_named_like_anothers_folder_never_gets_it(tmp_path: Path, fakes: Fakes) -> None:
    dep = campaign_file.load(named(tmp_path, "dep", "out", "dep.yaml"))
    base_dir = tmp_path / "state"
    other_path = named(tmp_path, folder_of(dep, base_dir).name, "other", "other.yaml")
    other = campaign_file.load(other_path)
    folder_of(dep, base_dir).mkdir(parents=True)
    (folder_of(dep, base_dir) / "owner.json").write_text(
        json.dumps({"campaign": "dep", "out": str(dep.out.resolve())})
    )
    held = state.state_root(dep, dep.testbeds[0], base_dir) / "local"
    held.mkdir(parents=True)
    (held / "terraform.tfstate").write_text(json.dumps({"resources": [{"x": 1}]}))
    assert state.state_root(other, other.testbeds[0], base_dir) != held.parent
    # Its run deploys and destroys its own testbeds; dep's is left as it was.
    assert cli.main(["campaign", "run", str(other_path)]) == 0
    assert (held / "terraform.tfstate").is_file()
    assert json.loads((held.parent.parent / "owner.json").read_text())["campaign"] == "dep"


def test_a_run_marks_its_folder_as_its_own(tmp_path: Path, fakes: Fakes) -> None:
    path = base(tmp_path)
    campaign = campaign_file.load(path)
    assert cli.main(["campaign", "run", str(path)]) == 0
    folder = folder_of(campaign, tmp_path / "state")
    owner = json.loads((folder / "owner.json").read_text())
    assert owner == {"campaign": "t", "out": str((tmp_path / "out").resolve())}
    assert oct((folder / "owner.json").stat().st_mode & 0o777) == "0o600"


def listing(folder: Path) -> list[tuple[str, bytes]]:
    return sorted(
        (str(p.relative_to(folder)), p.read_bytes() if p.is_file() else b"")
        for p in folder.rglob("*")
    )


OURS = {"campaign": "t", "out": "<out>"}
MARKERS = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=100).map(str.encode),
    st.fixed_dictionaries(
        {"campaign": st.one_of(st.just("t"), st.text(max_size=50)), "out": st.text(max_size=50)}
    ).map(lambda d: json.dumps(d).encode()),
    st.sampled_from(
        [
            b"",
            b"null",
            b"[]",
            b'{"campaign": "t"}',
            b'{"campaign": "t", "out": "<out>", "more": 1}',
            b'{"campaign": "dep", "out": "<out>"}',
            b'{"campaign": "t\\u001b[2J\\n", "out": "\\ud800"}',
            b'{"campaign": "t", "out": "<out>"' + b" " * 70_000 + b"}",
            b"[" * 100_000,
        ]
    ),
)


@settings(_SETTINGS, max_examples=40)
@given(marker=MARKERS)
def test_a_folder_another_campaign_owns_is_refused_with_nothing_created(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str], marker: bytes
) -> None:
    path = tmp_path / "c.yaml"
    if not path.exists():
        path = base(tmp_path)
    campaign = campaign_file.load(path)
    out = str((tmp_path / "out").resolve())
    marker = marker.replace(b"<out>", json.dumps(out)[1:-1].encode())
    try:
        if json.loads(marker) == {**OURS, "out": out}:
            return  # this campaign's own marker
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    folder = folder_of(campaign, tmp_path / "state")
    shutil.rmtree(tmp_path / "state", ignore_errors=True)
    (folder / "a" / "local").mkdir(parents=True)
    (folder / "a" / "local" / "terraform.tfstate").write_text('{"resources": [1]}')
    (folder / "owner.json").write_bytes(marker)
    before = listing(tmp_path / "state")
    for argv in (["campaign", "run", str(path)], ["campaign", "destroy", str(path)]):
        capsys.readouterr()
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("hpcbench: error: "), err
        assert err[0].isprintable() and str(folder) in err[0], err
        assert listing(tmp_path / "state") == before
        assert not (tmp_path / "out").exists()
    assert fakes.calls == []


def test_a_folder_without_a_marker_is_refused_while_it_holds_state(
    tmp_path: Path, fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    campaign = campaign_file.load(path)
    folder = folder_of(campaign, tmp_path / "state")
    (folder / "b" / "local" / "leases").mkdir(parents=True)
    (folder / "b" / "local" / "leases" / "job.json").write_text("{}")
    before = listing(tmp_path / "state")
    assert cli.main(["campaign", "run", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no owner.json naming its campaign" in err[0], err
    assert f"HPCBENCH_STATE={folder / 'b'} python -m hpcbench destroy --env local" in err[0]
    assert listing(tmp_path / "state") == before and fakes.calls == []
    # Released by hand: what is left (an ssh folder, a log) is taken and marked.
    shutil.rmtree(folder / "b" / "local")
    (folder / "b" / "ssh").mkdir()
    assert cli.main(["campaign", "run", str(path)]) == 0
    assert json.loads((folder / "owner.json").read_text())["campaign"] == "t"


def test_a_marker_that_is_a_link_or_a_folder_is_refused(tmp_path: Path) -> None:
    campaign = campaign_file.load(base(tmp_path))
    folder = folder_of(campaign, tmp_path)
    folder.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text(json.dumps({"campaign": "t"}))
    (folder / "owner.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(UsageError, match="symbolic link"):
        state.state_root(campaign, campaign.testbeds[0], tmp_path)
    (folder / "owner.json").unlink()
    (folder / "owner.json").mkdir()
    with pytest.raises(UsageError, match="not a regular file"):
        state.claim(campaign, tmp_path)


def test_destroy_names_kept_campaign_folders_and_campaign_destroy_removes_them(
    tmp_path: Path, fakes: Fakes, capfd: pytest.CaptureFixture[str]
) -> None:
    path = base(tmp_path)
    folder = folder_of(campaign_file.load(path), tmp_path / "state")
    fakes.destroy_rc = 1  # the testbeds' destroy fails: they stay held
    assert cli.main(["campaign", "run", str(path)]) == 1
    capfd.readouterr()
    # `hpcbench destroy --env local` (make destroy) leaves a campaign's testbeds alone,
    # and names each campaign folder, what it holds and the command that releases it.
    assert cli.main(["destroy", "--env", "local"]) == 0
    (line,) = [x for x in capfd.readouterr().out.splitlines() if str(folder) in x]
    assert "campaign 't'" in line and "testbed a holds machines in Terraform's state" in line
    assert (
        f"`python -m hpcbench campaign destroy {path.resolve()}` releases it and removes the folder"
    ) in line
    # That command releases them, then removes the folder: nothing is named after it.
    fakes.destroy_rc = 0
    assert cli.main(["campaign", "destroy", str(path)]) == 0
    assert f"removed {folder}" in capfd.readouterr().err and not folder.exists()
    assert cli.main(["destroy", "--env", "local"]) == 0
    assert "campaign state" not in capfd.readouterr().out
    # A run that released everything leaves a folder that holds nothing: named, and
    # removed by the same command, which destroys nothing.
    again = named(tmp_path, "t", "out2", "again.yaml")
    folder = folder_of(campaign_file.load(again), tmp_path / "state")
    assert cli.main(["campaign", "run", str(again)]) == 0
    assert folder.is_dir() and cli.main(["destroy", "--env", "local"]) == 0
    assert "holds nothing: `python -m hpcbench campaign destroy" in capfd.readouterr().out
    destroyed = fakes.calls.count(("destroy", "a"))
    assert cli.main(["campaign", "destroy", str(again)]) == 0
    assert not folder.exists() and fakes.calls.count(("destroy", "a")) == destroyed


@settings(_SETTINGS, max_examples=60)
@given(
    note=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=100).map(lambda t: (t + "\n").encode("utf-8", "surrogatepass")),
        st.sampled_from([b"/a b/c.yaml\n", b"/x\n/y\n", b"\x1b[2J\n", b"\n", b"/c" * 3000 + b"\n"]),
    )
)
def test_a_crafted_campaign_file_note_is_named_in_one_line_or_not_at_all(
    tmp_path: Path, note: bytes
) -> None:
    folder = tmp_path / "state" / "campaigns" / "t-00000000"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "owner.json").write_text(json.dumps({"campaign": "t", "out": "/o"}))
    (folder / state.FILE_NOTE).write_bytes(note)
    (line,) = state.kept(tmp_path / "state")
    assert line.isprintable() and "holds nothing" in line
    try:
        text = note.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    one = (
        text.endswith("\n") and "\n" not in text[:-1] and 1 < len(note) <= files.CAMPAIGN_NOTE.most
    )
    if one and text[:-1].isprintable():
        assert f"campaign destroy {shlex.quote(text[:-1])}` removes it" in line
    elif not one:
        assert "campaign destroy <the campaign file of t>` removes it" in line


# ------------------------------------------------------------ Docker names
DOCKER_NAME = re.compile(r"[a-z][a-z0-9-]{1,30}")  # modules/docker_testbed's validation
LABELS = st.from_regex(campaign_file.NAME, fullmatch=True)


def local_names(path: Path) -> list[str]:
    return [dict(tb.settings)["name"] for tb in campaign_file.load(path).testbeds]


def test_each_local_testbed_of_each_campaign_has_docker_names_of_its_own(
    tmp_path: Path,
) -> None:
    one = local_names(base(tmp_path))
    elsewhere = local_names(write(tmp_path, BASE.format(out=tmp_path / "o"), "o.yaml"))
    renamed = local_names(named(tmp_path, "u", "out", "u.yaml"))
    names = one + elsewhere + renamed
    assert len(set(names)) == 6 and "hpcbench-local" not in names
    assert all(DOCKER_NAME.fullmatch(n) and n.startswith("hpcbench-") for n in names), names
    assert one == local_names(base(tmp_path))  # stable: a resumed run meets its containers
    given = base(tmp_path, **{"testbeds.1.settings": {"node_count": 2, "name": "mine"}})
    assert local_names(given)[1] == "mine"


def test_the_default_name_leaves_cell_ids_and_other_testbeds_as_they_were(
    tmp_path: Path,
) -> None:
    data = yaml.safe_load(BASE.format(out=tmp_path / "out"))
    data["testbeds"][1] = {"name": "b", "hosts": ["h1:1", "h2:1"]}
    path = write(tmp_path, yaml.safe_dump(data))
    campaign = campaign_file.load(path)
    a, b = campaign.testbeds
    assert dict(a.settings)["link_rate"] == "1gbit" and "name" in dict(a.settings)
    assert b.settings == ()
    # The fingerprint is of the settings the file gives (a journal's cells stay).
    given = {"env": "local", "settings": {"node_count": "2", "link_rate": "1gbit"}, "ansible": {}}
    assert a.fingerprint == testbeds.digest(given, 16)


@settings(_SETTINGS, max_examples=60)
@given(names=st.lists(LABELS, min_size=2, max_size=2, unique=True), testbed=LABELS)
def test_a_default_docker_name_is_valid_and_apart_for_any_campaign_name(
    tmp_path: Path, names: list[str], testbed: str
) -> None:
    found = []
    for name in names:
        data = yaml.safe_load(BASE.format(out=tmp_path / "out"))
        data["name"] = name
        data["testbeds"] = [{"name": testbed, "env": "local"}]
        found += local_names(write(tmp_path, yaml.safe_dump(data), "n.yaml"))
    assert all(DOCKER_NAME.fullmatch(n) for n in found), found
    assert found[0] != found[1]
