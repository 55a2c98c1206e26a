//! The root `README.md`: a short guide for agents and people, generated from the world.

use super::World;

pub(super) fn render(world: &World) -> String {
    let mut hosts = String::new();
    for m in world.hosts() {
        let description = m
            .host
            .entry(&[])
            .ok()
            .flatten()
            .map(|i| i.description)
            .unwrap_or_default();
        hosts.push_str(&format!(
            "- `{}/` ({}): {}\n",
            m.path.join("/"),
            m.kind,
            description
        ));
    }
    let mount = world.mount_point().display();
    let shared = if world.calls().shared_state().is_some() {
        "\nOther mounts share this world's state: `runs/`, `.wip/log`, `.wip/events` and the \
         known world include their calls, and what they change shows here too.\n"
    } else {
        ""
    };
    format!(
        r#"# This world

{description}

{hosts}
## Explore
Every object is a directory: `cat description` says what it is, `cat ref` is its identity,
`ls ops/` lists what it can do. Children are objects it holds (`ls tracker/issues/`).
`ops` links to the object's unlisted `.ops/`, so `find`, `grep -r` and `tar` see content
only. Large collections list a first page (their `description` says how many); any one is
reachable by name. A child named like an entry's own files shows with `~` (`ops~`).
{titled}
## Files are files
A files host is its directory: programs run in it (`git`, `make`, `python3 -m unittest`,
`sed -i`, editors). Each path's entry is the unlisted `PATH@` (`cat src/main.rs@/description`,
`ls src/main.rs@/ops/`; `.@` is this folder's, `files@` the host's; `files@/paths/P` also
reaches a path that is gone). Every change through the mount is a run of the op of its name
(`write`, `create`, `remove`, `rename`, `mkdir`, `chmod`, `touch`, …) in
`PATH@/ops/NAME/runs/`, judged by the policy: a refusal is EACCES, and that op's `guard` and
`result` say why. The explicit ops (`read`, `write`, `edit`, `remove`, `rename`, `mkdir`)
take JSON. Undo: `{wip} diff files` shows what changed; `echo > RUN/ops/undo/call` undoes
one change, `echo '{{"since":…}}' > files@/ops/revert/call` all since a run, event or time.

## Content: `body`
Other objects with content have a `body` file (an issue's markdown, a row as JSON): read it
with any tool; reading runs nothing. A writable `body` (`-rw-`) replaces the content, at
close, as ONE call of the host's op, with its guard, run and errno.

## Check, then act
- `cat ops/NAME/description`, `ops/NAME/schema`: what it does, its arguments.
- `cat ops/NAME/guard`: `allowed` or `blocked`, one line per condition; a `✗` line names
  what would satisfy it.
- Write the arguments into `call`, read `result`:
  `echo '{{"reason":"fixed"}}' > ops/close/call && cat ops/close/result`.
  A JSON object, `key=value` lines, or plain text for one string; none: `echo > call`.
  Everything one `>` writes (lines, `{{ …; }} >`, a heredoc) is ONE call; to send text
  whose first line looks like `KEY=…` exactly, start it with a line `--`.
- Errors: EINVAL arguments, EPERM a guard, EACCES policy, EIO the backend, ETIMEDOUT it
  goes on as a run, ECANCELED cancelled, EFBIG too large, EINPROGRESS waits for a person.
  The words are in `result` (per terminal session). JSON and a lone newline fail in the
  write (bash prints it); plain text runs at close, which bash's builtins do not report:
  `cat result` after.
- `{wip} call PATH [ARGS]` does it in one step and prints the result.

## A person's sign-off
`✗ sign_off: needs a person's sign-off`: the call waits as a pending run (EINPROGRESS);
`result` names it. A person, outside this mount and your session, runs `{wip} approve RUN`
or `{wip} deny RUN`. `.wip/pending` lists them. `✗ policy: denied by rule N` means never.

## Long calls and results
A call past `call_timeout_ms` answers ETIMEDOUT and goes on; `result` names its run.
`RUN/progress`, `echo > RUN/ops/wait/call` (waits), `echo > RUN/ops/cancel/call` (stops).
What a call creates or finds is printed in `result` as absolute paths. Every call stays in
`ops/NAME/runs/N/` (args, status, result, caller, discovered/); `runs/` is unlisted but
`ls ops/NAME/runs/` works.

## More
`ops/resolve` (ref → paths), `ops/locate` (words → known entries), `.wip/known`,
`.wip/events` (JSON lines, `tail -f`), `.wip/log`, `.wip/runs`, `.wip/status`
(`{wip} status DIR`), `.wip/config`. Mounted at {mount}.
{shared}"#,
        description = world.description(),
        wip = wip_command(),
        titled = if world.settings().titled {
            "Titled names are on: collections list `42 Crash when config is missing`; the bare\n\
             `42` is the same object, and results print the bare one. Quote names in loops.\n"
        } else {
            ""
        },
    )
}

/// How to run `wip` from here: the running binary's absolute path, so the advice works
/// whether or not `wip` is on PATH.
pub(super) fn wip_command() -> String {
    std::env::current_exe()
        .ok()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "wip".to_string())
}
