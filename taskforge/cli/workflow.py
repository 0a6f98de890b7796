"""``taskforge workflow APP WORKFLOW_ID``: a workflow, its steps in order, and what holds it up."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from ..job import JobInfo, JobState
from ..job_json import workflow_to_json
from ..printable import printable
from ..workflows.handle import WorkflowInfo, WorkflowState
from .common import USAGE, cli_errors, fail, open_app
from .job import STATE_COLOURS, missing_is_usage
from .table import Cell, cell, render

if TYPE_CHECKING:
    pass

WORKFLOW_HELP = """Show one workflow: its state, its steps in workflow order, and the step that holds it up.

\b
Example:
  taskforge workflow myapp:app 9c1e4f851c9f14525bf01db70be8eba9
  taskforge workflow myapp:app 9c1e4f851c9f14525bf01db70be8eba9 --json | jq '.steps[].state'
  taskforge workflow myapp:app 9c1e4f851c9f14525bf01db70be8eba9 --retry

The step that holds the workflow up is the step that ended it (dead; never
one that succeeded since), or, while it runs, the first step in workflow
order that has not succeeded.
Steps are jobs: `taskforge job APP STEP_ID` shows one whole.

--json prints one object with exactly the field names of WorkflowInfo: id,
state (running, succeeded, dead, cancelled), created_at, finished_at (ISO
8601 UTC or null), error, failed_step (the job id of the step that ended it,
or null), steps (in workflow order, groups flattened, each as `taskforge job
--json` prints a job; steps not sent yet are listed too, with null times).

--retry resumes a dead workflow (WorkflowHandle.retry()): it is running
again, its dead steps run again with a fresh set of attempts, the steps its
death cancelled are planned again, and on_failure runs again only if it
dies again; then it is shown. A workflow that is not dead exits with status
2, unchanged. Retrying one of its dead steps (`taskforge dead APP retry
STEP_ID`) does the same.

An unknown id (never existed, or ended longer ago than the app's retention)
exits with status 2.
"""

WORKFLOW_COLOURS = {
    WorkflowState.SUCCEEDED: "green",
    WorkflowState.RUNNING: "cyan",
    WorkflowState.DEAD: "red",
    WorkflowState.CANCELLED: "magenta",
}


@click.command(help=WORKFLOW_HELP)
@click.argument("app")
@click.argument("workflow_id")
@click.option("--json", "as_json", is_flag=True, help="Print the WorkflowInfo fields as one JSON object.")
@click.option("--retry", is_flag=True, help="Resume a dead workflow: its dead steps run again.")
def workflow(app: str, workflow_id: str, as_json: bool, retry: bool) -> None:
    the_app = open_app(app)
    with cli_errors(), missing_is_usage():
        handle = the_app.workflow(workflow_id)
        if retry and not handle.retry():
            state = handle.status().value
            fail(f"workflow {workflow_id} is {state}, not dead: only a dead workflow can be retried", USAGE)
        info = handle.info()
    if as_json:
        click.echo(json.dumps(workflow_to_json(info), indent=2))
    else:
        click.echo(format_workflow(info))


def format_workflow(info: WorkflowInfo) -> str:
    data = info.to_dict()
    held = info.holding_step
    on_failure = info.on_failure
    rows = [
        ("id", printable(info.id)),
        ("state", click.style(info.state.value, fg=WORKFLOW_COLOURS.get(info.state), bold=True)),
        ("created_at", data["created_at"] or "-"),
        ("finished_at", data["finished_at"] or "-"),
        ("steps", step_summary(info.steps)),
    ]
    if info.failed_step is not None:
        rows.append(("failed_step", click.style(printable(info.failed_step), fg="red")))
    if info.error:
        rows.append(("error", click.style(printable(info.error, lines=True), fg="red")))
    if held is not None:
        rows.append(("held up by", f"{printable(held.id)} {printable(held.task)} ({held.state.value})"))
    lines = [f"{click.style(name.ljust(13), bold=True)}{value}" for name, value in rows]
    return "\n".join([*lines, "", step_table(info.steps, held, on_failure)])


def step_summary(steps: list[JobInfo]) -> str:
    """'4: 2 succeeded, 1 dead, 1 cancelled', the states in JobState order."""
    counts = {state: sum(1 for step in steps if step.state is state) for state in JobState}
    parts = [f"{n} {state.value}" for state, n in counts.items() if n]
    return f"{len(steps)}: {', '.join(parts)}" if parts else "0"


def step_table(steps: list[JobInfo], held: JobInfo | None, on_failure: str | None) -> str:
    headers = ["#", "STEP", "TASK", "QUEUE", "STATE", "ATTEMPTS", "NOTE"]
    rows = []
    for number, step in enumerate(steps, 1):
        notes = []
        if step.id == on_failure:
            notes.append("on_failure")
        if held is not None and step.id == held.id:
            notes.append("<- holds the workflow up")
        rows.append(
            [
                cell(number),
                cell(step.id),
                cell(step.task, bold=True),
                cell(step.queue),
                cell(step.state.value, fg=STATE_COLOURS.get(step.state)),
                Cell(f"{step.attempts}/{step.max_attempts}", right=True),
                cell(" ".join(notes), fg="yellow" if held is step else None),
            ]
        )
    return render(headers, rows)
