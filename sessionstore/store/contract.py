"""The trial contract: the text an agent is given about where and how to record its work.

It is rendered with `sessionstore.format.template.render` from the shipped default
template (`contract_template.md` in this package) or from a user's template
file, with the variables of `contract_variables` (listed in docs/harness.md).

An agent writes either in the session directory itself, or in a workspace of
its own that `sessionstore mirror` copies into the session. For a workspace,
every path is rendered under it (the mirror's source, the only tree the agent
writes), and the contract tells the agent that the store's own files are not
its to write: the mirror never copies them into a session.

The default template must use every variable (render's strict check). A
user's template may use any subset: it is given only the variables it names,
so adding a variable in a later version never breaks an existing template;
a name that is not a contract variable is an error naming the file, line and
column and listing the names that exist.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessionstore import _json as jsonio
from sessionstore._display import escape
from sessionstore._fs.atomic import TEMP_PREFIX
from sessionstore._fs.read import read_named, user_path
from sessionstore.errors import InvalidInput, TemplateError
from sessionstore.format.names import CONSTRAINTS, MANIFEST, MARKERS, REPORT, SERVICE, TRIALS
from sessionstore.format.template import render, used_variables
from sessionstore.storage.s3_path import S3Path, absolute
from sessionstore.store.files import constraints_of
from sessionstore.store.status import planned_trials

if TYPE_CHECKING:
    from sessionstore.store.collection import Collection
    from sessionstore.store.session import Session

__all__ = ["DEFAULT_TEMPLATE", "contract_variables", "default_template", "render_contract"]

DEFAULT_TEMPLATE = "contract_template.md"
# The file name the contract asks for; `output_contract` in the markers points at it.
LOG_NAME = "run.log"
# A prompt template is a page or two; anything this large is almost certainly not one.
TEMPLATE_MAX = 16 * 1024 * 1024


def default_template() -> str:
    """The text of the shipped default template."""
    return (
        resources.files("sessionstore.store").joinpath(DEFAULT_TEMPLATE).read_text(encoding="utf-8")
    )


def contract_variables(
    session: Session, workspace: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """Every variable a contract template may use, for `session` (absolute paths).

    Paths are under `workspace` when given (the directory the agent writes
    and the mirror copies into the session), else under the session
    directory; `<n>` and `<k>` stand for the record numbers. Optional values
    (`workspace`, `session_name`, `planned_trials`, `constraints`) are "" when
    absent, so `<!--?if NAME-->` blocks drop them. Raises `InvalidInput` for a
    workspace that is not a directory, is the session directory itself or is
    inside it, for a root (the workspace, else the session directory) that
    `escape` would change (printed escaped, it would name another path), and
    for a collection that cannot be listed (`_next`).
    """
    session_dir = absolute(session.path)
    root = _root(session_dir, workspace)
    trials, service = root / TRIALS, root / SERVICE
    trial, attempt = trials / "<n>", service / "<k>"
    manifest = session.manifest or {}
    planned = planned_trials(session)
    # A torn constraints.json reads as none: inspect shows its reason, the prompt does not.
    constraints, _ = constraints_of(session.storage, session.key)
    # JSON an agent may parse: what a terminal acts on as JSON escapes (`\u0085`, the same
    # value), not as the tables show it (`\x85`, which JSON has not).
    shown = jsonio.dumps_output(constraints, indent=True).decode() if constraints else ""
    name = manifest.get("name")
    # The mirror copies the workspace's records into the session, so a number
    # either already holds is taken.
    sessions = [session]
    if root != session_dir and root.is_dir():
        sessions.append(type(session).open(root))
    return _printable(
        {
            "session_id": session.id or session_dir.name,
            "session_name": name if isinstance(name, str) else "",
            "workspace": str(root) if root != session_dir else "",
            "session_dir": str(root),
            "manifest_path": str(root / MANIFEST),
            "constraints_path": str(root / CONSTRAINTS),
            "report_path": str(root / REPORT),
            "planned_trials": planned if planned is not None else "",
            "constraints": shown,
            "temp_prefix": TEMP_PREFIX,
            "log_name": LOG_NAME,
            "trials_dir": str(trials),
            "trial_dir": f"{trial}/",
            "trial_config": str(trial / "task.yml"),
            "trial_patches": f"{trial / 'patches'}/",
            "trial_log": str(trial / LOG_NAME),
            "trial_marker": str(trial / MARKERS[TRIALS]),
            "next_trial": _next(s.trials for s in sessions),
            "service_dir": str(service),
            "attempt_dir": f"{attempt}/",
            "attempt_config": str(attempt / "service.yml"),
            "attempt_log": str(attempt / LOG_NAME),
            "attempt_marker": str(attempt / MARKERS[SERVICE]),
            "next_attempt": _next(s.service for s in sessions),
        }
    )


def _next(collections: Iterable[Collection]) -> int:
    """One past the highest record number in any of the collections.

    `InvalidInput` for one that cannot be listed (unreadable, a symlink, a file): read
    as empty, it would give a number its records may already hold.
    """
    highest = 0
    for collection in collections:
        numbers = collection.numbers()
        if collection.problem is not None:
            raise InvalidInput(
                str(collection.path),
                f"{collection.problem}; its records cannot be counted for the next number",
            )
        highest = max(highest, *numbers, 0)
    return highest + 1


def _root(session_dir: Path, workspace: str | os.PathLike[str] | None) -> Path:
    """The directory the agent writes in: the workspace, else the session directory."""
    root = session_dir if workspace is None else _workspace(workspace, session_dir)
    if escape(str(root)) != str(root):
        # Every path is printed escaped (`_printable`), and escaped it names another
        # directory: the agent would write where no mirror or reader ever looks.
        raise InvalidInput(
            str(root),
            "holds a control or invisible character or a backslash, which the contract "
            "could print only escaped, naming another path",
        )
    return root


def _workspace(workspace: str | os.PathLike[str], session_dir: Path) -> Path:
    """The absolute workspace path; it may not exist yet (the agent creates it)."""
    path = Path(os.path.abspath(user_path(workspace, "workspace")))
    if path.exists() and not path.is_dir():
        raise InvalidInput(os.fspath(workspace), "the workspace is not a directory")
    if isinstance(session_dir, S3Path):
        return path
    # The mirror's own rule for its source (`Mirror`): a contract for a workspace the
    # mirror refuses would send the agent's records where nothing copies them.
    # realpath, not Path.resolve: a symlink loop is a path like any other, no RuntimeError.
    real, session_real = Path(os.path.realpath(path)), Path(os.path.realpath(session_dir))
    if real == session_real:
        raise InvalidInput(
            os.fspath(workspace),
            "the workspace is the session directory itself; for an agent that writes "
            "in place, render the contract without a workspace",
        )
    if session_real in real.parents:
        raise InvalidInput(
            os.fspath(workspace),
            "the workspace is inside the session directory, which the mirror never copies "
            "into itself; give a workspace outside it",
        )
    return path


def render_contract(
    session: Session,
    template: str | os.PathLike[str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> str:
    """Render the contract for `session` from the template file `template` (None: default).

    `workspace` is the agent's own directory that a mirror copies into the
    session (see `contract_variables`). Raises `InvalidInput` if the file
    cannot be read or the workspace is unusable, and `TemplateError`, whose
    message starts with the template's path, if it is malformed or names an
    unknown variable.
    """
    variables = contract_variables(session, workspace)
    if template is None:
        return render(default_template(), **variables)
    source = os.fspath(template)
    # As every file a user names is read: a FIFO is never waited on, a device
    # (/dev/zero) never read without end.
    data = read_named(source, TEMPLATE_MAX)
    if data is None:
        raise InvalidInput(source, f"is larger than {TEMPLATE_MAX} bytes; not a template")
    body = data.removeprefix(codecs.BOM_UTF8)  # an editor's BOM is no text
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = exc.start + len(data) - len(body)  # the file's offset, its BOM counted
        raise InvalidInput(source, f"not UTF-8 text: {exc.reason} at byte {at}") from None
    try:
        used = used_variables(text)
        for name, line, column in used:
            if name not in variables:
                known = ", ".join(sorted(variables))
                raise TemplateError(
                    f"unknown variable {name!r}; a contract template may use: {known}", line, column
                )
        return render(text, **{name: variables[name] for name, _, _ in used})
    except TemplateError as exc:
        raise TemplateError(exc.problem, exc.line, exc.column, source) from None


def _printable(values: dict[str, Any]) -> dict[str, Any]:
    """Every text value with control characters escaped (`escape`), but the constraints:
    JSON that `dumps_output` made safe to print.

    The name, the constraints and the paths come from files and options an agent
    or a user may have written; the contract is read by people and by the agent,
    and neither may get a forged line or a terminal escape from it.
    """
    safe = {
        key: escape(value) if isinstance(value, str) else value for key, value in values.items()
    }
    # JSON for the agent, unsafe characters already JSON escapes (`dumps_output`): escaped
    # again, its own escapes (`\n`, `\"`) would read as other characters.
    safe["constraints"] = values["constraints"]
    return safe
