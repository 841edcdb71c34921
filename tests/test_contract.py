"""The trial contract: every path absolute and present, absent values gone, user templates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from sessionstore.cli.contract import contract
from sessionstore.contract import contract_variables, default_template, render_contract
from sessionstore.errors import InvalidInput, TemplateError
from sessionstore.store import Session, Store
from sessionstore.template import _parse

DOCS = Path(__file__).parent.parent / "docs" / "harness.md"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def session(store: Store) -> Session:
    return store.create(
        id="tune", name="tune-llama", trials=3, constraints={"max_ttft_ms": 200}, pid=None
    )


def test_the_default_names_every_file_by_its_absolute_path(session: Session) -> None:
    text = session.contract()
    root = session.path.resolve()
    for path in [
        f"{root}/trials/<n>/",
        f"{root}/trials/<n>/task.yml",
        f"{root}/trials/<n>/patches/",
        f"{root}/trials/<n>/run.log",
        f"{root}/trials/<n>/trial.json",
        f"{root}/service/<k>/",
        f"{root}/service/<k>/service.yml",
        f"{root}/service/<k>/run.log",
        f"{root}/service/<k>/verification.json",
        f"{root}/report.json",
        f"{root}/constraints.json",
    ]:
        assert f"`{path}`" in text, path
    assert "# Trial contract for tune-llama\n" in text
    assert "You have 3 trials planned." in text
    assert '```json\n{\n  "max_ttft_ms": 200\n}\n```' in text
    assert "<!--" not in text and not re.search(r"\{[a-z_]+\}", text)


def test_the_write_order_is_stated_where_each_record_is_defined(session: Session) -> None:
    text = session.contract()
    trial = text[text.index("## A trial") : text.index("## A verification attempt")]
    steps = [trial.index(s) for s in ("by `mkdir` of the next number", "Write the trial's files")]
    steps += [trial.index("trial.json` last, atomically"), trial.index("Never change anything")]
    assert steps == sorted(steps)
    assert "then rename it onto the real name" in text
    for field in ("`failed`", "`benchmark`", '"metrics"', "`output_contract`", "`learned`"):
        assert field in trial


def test_absent_values_vanish(store: Store, tmp_path: Path) -> None:
    bare = store.create(id="bare", pid=None).contract()
    assert bare.startswith("# Trial contract\n\n")
    assert "planned" not in bare and "constraints:" not in bare and "```json" not in bare
    raw = tmp_path / "raw"
    raw.mkdir()
    text = Session.open(raw).contract()  # no manifest, no constraints.json, no trials/
    assert "(session\n`raw`)" in text and "(currently 1)" in text


def test_next_numbers_follow_the_collections(session: Session) -> None:
    session.trials.begin()
    session.trials.begin()
    variables = contract_variables(session)
    assert (variables["next_trial"], variables["next_attempt"]) == (3, 1)


def test_the_default_template_uses_every_variable_and_the_docs_list_them(session: Session) -> None:
    variables = set(contract_variables(session))
    assert {name for name, _, _ in _parse(default_template())[1]} == variables
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", DOCS.read_text(), re.MULTILINE))
    assert documented == variables


def test_a_user_template_may_use_any_subset(session: Session, tmp_path: Path) -> None:
    template = tmp_path / "mine.md"
    template.write_text(
        "Write {trial_marker} last.<!--?if planned_trials--> ({planned_trials})<!--?end-->\n"
    )
    assert render_contract(session, template) == (
        f"Write {session.path.resolve()}/trials/<n>/trial.json last. (3)\n"
    )
    assert session.contract(str(template)) == render_contract(session, template)


def test_user_template_errors_name_the_file(session: Session, tmp_path: Path) -> None:
    template = tmp_path / "mine.md"
    template.write_text("ok\n  see {trial_dri}\n")
    with pytest.raises(TemplateError) as caught:
        session.contract(template)
    known = ", ".join(sorted(contract_variables(session)))
    assert str(caught.value) == (
        f"{template}:2:7: unknown variable 'trial_dri'; a contract template may use: {known}"
    )
    assert caught.value.source == str(template)
    template.write_text("<!--?if session_name-->x\n")
    with pytest.raises(TemplateError, match=rf"^{re.escape(str(template))}:1:1: 'if session_name'"):
        session.contract(template)
    with pytest.raises(InvalidInput) as missing:
        session.contract(tmp_path / "absent.md")
    assert (
        str(missing.value)
        == f"{tmp_path / 'absent.md'}: cannot read the template: No such file or directory"
    )


def test_cli_prints_the_contract(session: Session, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(contract, ["tune", "--store", str(session.path.parent)])
    assert (result.exit_code, result.stdout) == (0, session.contract())
    bad = tmp_path / "bad.md"
    bad.write_text("{nope}")
    result = runner.invoke(contract, [str(session.path), "--template", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {bad}:1:1: unknown variable 'nope'; a contract")
    assert len(result.stderr.splitlines()) == 1
