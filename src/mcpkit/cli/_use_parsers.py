"""The parsers of the commands that use a server: list, call, task, skills, read, prompt, inspect."""

from __future__ import annotations

from ._commands import Commands, _add_no_input, _add_words, _client_options, _lazy, _Parser

# -- using a server: list, call, read, prompt, inspect ------------------------------------


def _add_list(commands: Commands) -> None:
    lst = commands.add_parser(
        "list",
        help="list a server's tools, resources, templates and prompts",
        usage="mcpkit list TARGET [tools|resources|templates|prompts] [options]",
    )
    _add_words(lst, metavar="TARGET [SECTION]")
    _client_options(lst)
    lst.set_defaults(func=_lazy("_use", "cmd_list"))


def _add_call(commands: Commands) -> None:
    call = commands.add_parser(
        "call",
        help="call a tool",
        usage="mcpkit call TARGET TOOL [key=value ...] [--json-args '{...}'] [options]",
        description="Call TOOL. key=value values are JSON when they parse as JSON (n=3, ok=true, "
        "tags='[\"a\"]'), else strings (a property the tool declares as a string stays a string). "
        "A tool result with isError exits with 4 and its text on stderr. When the tool asks the user "
        "for input (elicitation), a terminal on stdin answers it with a form; the current directory is "
        "offered as the client's roots. When the server runs the call as a task, its id is printed on "
        "stderr at once, then its status as it changes (in place on a terminal); the task's questions "
        "are answered with the same form; Ctrl+C cancels the task (tasks/cancel) before exiting. "
        "--timeout bounds each request, not the task: a task takes as long as it takes.",
    )
    _add_words(call)
    call.add_argument(
        "--json-args", metavar="JSON", help="all arguments as one JSON object (or @FILE, or - for stdin)"
    )
    _add_no_input(call)
    _client_options(call)
    call.set_defaults(func=_lazy("_use", "cmd_call"))


_TASK_TARGETS = (
    "TARGET is the server's http(s):// URL (or the NAME of such a server in --config): a task lives "
    "in the server process that made it (or in the Redis its workers share), so it outlives the "
    "connection that started it, but a stdio server's tasks end with the process, which no other "
    "command can reach. Tasks are the 2026-07-28 era's (the io.modelcontextprotocol/tasks extension) "
    "and, experimental, 2025-11-25's (--protocol 2025-11-25). A TASK_ID that starts with '-' is taken "
    "as the id right after TARGET, or may follow --: mcpkit task get URL [options] -- TASK_ID."
)


def _add_task(commands: Commands) -> None:
    task = commands.add_parser(
        "task",
        help="check on, wait for or cancel a task by its id (HTTP servers)",
        description="A tool call the server runs as a task can be looked at, waited for and cancelled "
        "later, from any process, with the task's id (mcpkit call prints it). " + _TASK_TARGETS,
    )
    actions = task.add_subparsers(dest="task_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    get = actions.add_parser(
        "get",
        help="show a task: status, status message; its result or error once ended",
        usage="mcpkit task get TARGET TASK_ID [options]",
        description="Show a task (tasks/get): its status and status message; once it has ended, its "
        "result (completed) or error (failed); while it waits for input, its questions. Exits 0 "
        "whatever the status; --json prints the task as the server sent it. " + _TASK_TARGETS,
    )
    cancel = actions.add_parser(
        "cancel",
        help="cancel a task",
        usage="mcpkit task cancel TARGET TASK_ID [options]",
        description="Cancel a task (tasks/cancel) and show its status after. Cancellation is "
        "cooperative: the task ends cancelled, or completed or failed if it finished first; "
        "cancelling an ended task changes nothing. " + _TASK_TARGETS,
    )
    wait = actions.add_parser(
        "wait",
        help="follow a task to its end and print its result, answering its questions",
        usage="mcpkit task wait TARGET TASK_ID [options]",
        description="Follow a task to its end, showing its status as it changes, and print its result "
        "as mcpkit call does (same output, same exit codes). The task's questions are answered with "
        "a form when stdin is a terminal. Ctrl+C stops waiting and leaves the task running (mcpkit "
        "task cancel stops it). " + _TASK_TARGETS,
    )
    for action, name in ((get, "get"), (cancel, "cancel"), (wait, "wait")):
        _add_words(action)
        if action is wait:
            _add_no_input(action)
        _client_options(action, stdio=False)
        action.set_defaults(func=_lazy("_tasks", f"cmd_task_{name}"))


def _add_skills(commands: Commands) -> None:
    skills = commands.add_parser(
        "skills",
        help="list a server's skills, show one, read or export its files (verified)",
        description="The skills a server serves (the io.modelcontextprotocol/skills extension). Listing "
        "and showing a skill fetch none of its files; --file and --out fetch them, and print or write "
        "a file only once its size, sha256 digest and (SKILL.md) frontmatter match the server's entry: "
        "a file that does not is refused (exit 4) and nothing of it is printed or written.",
    )
    actions = skills.add_subparsers(dest="skills_cmd", metavar="ACTION", required=True, parser_class=_Parser)
    lst = actions.add_parser(
        "list",
        help="list the skills: name, URI, files, description",
        usage="mcpkit skills list TARGET [options]",
        description="List the server's skills (skills/list, every page). --json prints the entries as "
        "the server sent them (frontmatter, and each file's URI, size and digest).",
    )
    _add_words(lst)
    _client_options(lst)
    lst.set_defaults(func=_lazy("_skills", "cmd_skills_list"))
    get = actions.add_parser(
        "get",
        help="show a skill's entry, print one of its files, or export it to a directory",
        usage="mcpkit skills get TARGET NAME [--file PATH | --out DIR [--force]] [options]\n"
        "       mcpkit skills get TARGET --all --out DIR [--force] [options]",
        description="NAME is a skill's name, its path (acme/billing/refunds) or the URI of its SKILL.md. "
        "Without --file or --out: its entry (frontmatter; each file's path, size and digest). --file "
        "PATH prints that file (relative to the skill, e.g. SKILL.md or references/FORMS.md), verified. "
        "--out DIR writes the skill, every file verified, to DIR/NAME/ (a local skills directory); "
        "--all --out DIR every listed skill. A skill is written whole or not at all; an existing "
        "DIR/NAME is replaced only with --force.",
    )
    _add_words(get)
    get.add_argument("--file", metavar="PATH", help="print this file of the skill, verified")
    get.add_argument("--out", metavar="DIR", help="export the skill (verified) to DIR/NAME/")
    get.add_argument("--all", action="store_true", help="with --out: every skill the server lists")
    get.add_argument("--force", action="store_true", help="with --out: replace an existing DIR/NAME")
    _client_options(get)
    get.set_defaults(func=_lazy("_skills", "cmd_skills_get"))


def _add_read(commands: Commands) -> None:
    read = commands.add_parser("read", help="read a resource", usage="mcpkit read TARGET URI [options]")
    _add_words(read)
    _add_no_input(read)
    _client_options(read)
    read.set_defaults(func=_lazy("_use", "cmd_read"))


def _add_prompt(commands: Commands) -> None:
    prompt = commands.add_parser(
        "prompt", help="get a prompt", usage="mcpkit prompt TARGET NAME [key=value ...] [options]"
    )
    _add_words(prompt)
    _add_no_input(prompt)
    _client_options(prompt)
    prompt.set_defaults(func=_lazy("_use", "cmd_prompt"))


def _add_inspect(commands: Commands) -> None:
    insp = commands.add_parser(
        "inspect",
        help="open the web inspector (optionally connected to TARGET)",
        usage="mcpkit inspect [TARGET | -- COMMAND ...] [options]",
    )
    _add_words(insp)
    _client_options(insp, one_shot=False)
    insp.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    insp.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    insp.add_argument("--no-browser", action="store_true", help="do not open a browser")
    insp.set_defaults(func=_lazy("_use", "cmd_inspect"))
