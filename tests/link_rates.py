"""Where the link-rate grammar (hpcbench.performance.allreduce_model.TC_RATE) is held besides
Python, read out of the files: Terraform's validations of a rate and the
link_shaping role's check. tests/unit/test_link_rate_grammar.py keeps their
patterns the same as Python's; tests/infra/test_link_rate_agreement.py has tofu
and Ansible evaluate them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
ROLE = REPO / "ansible/roles/link_shaping"
# How a validation names the rate it checks, and what stands for one rate `s` when
# the condition is evaluated over many.
RATE_REFS = {
    "var.deploy_vars.link_rate": "s",
    "var.link_rate": "s",
    "values(var.node_link_rates)": "[s]",
}
_CONDITION = re.compile(r"^\s*condition\s*=\s*(.+)$", re.M)
_HCL_REGEX = re.compile(r'regex\("((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Condition:
    """One validation condition of a rate, as written in a .tf file."""

    file: str  # relative to the repository
    ref: str  # one of RATE_REFS
    text: str

    def patterns(self) -> list[str]:
        """The regular expressions it applies, HCL's escapes undone."""
        return [re.sub(r"\\(.)", r"\1", p) for p in _HCL_REGEX.findall(self.text)]

    def over_s(self) -> str:
        """The condition of one rate `s`."""
        text = self.text
        for ref, stand_in in RATE_REFS.items():
            text = text.replace(ref, stand_in)
        assert "var." not in text, f"{self.file}: a condition of more than the rate: {text}"
        return text


def terraform_files() -> list[Path]:
    """The .tf files of terraform/ and environments/, none of an init's (.terraform)."""
    found = [*REPO.glob("terraform/**/*.tf"), *REPO.glob("environments/**/*.tf")]
    return sorted(p for p in found if ".terraform" not in p.parts)


def terraform_conditions() -> list[Condition]:
    """Every validation condition of terraform/ and environments/ that checks a rate."""
    found = []
    for path in terraform_files():
        for match in _CONDITION.finditer(path.read_text()):
            for ref in RATE_REFS:
                if ref in match[1]:
                    found.append(Condition(str(path.relative_to(REPO)), ref, match[1].strip()))
                    break
    return found


def role_vars() -> dict[str, Any]:
    """The link_shaping role's derived values (vars/main.yml)."""
    return yaml.safe_load((ROLE / "vars/main.yml").read_text())


def role_check() -> dict[str, Any]:
    """The role's task that checks the rate (tasks/validate.yml)."""
    tasks = yaml.safe_load((ROLE / "tasks/validate.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == "Check the configured rate"]
    return task
