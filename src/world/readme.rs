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
`ls ops/` lists what you can do with it. Children are objects it contains
(`ls tracker/issues/`). `ops` is a link to the object's `.ops/`, which listings leave out,
so `find`, `grep -r`, `du` and `tar` see content only; `ops/NAME/…` works everywhere (to
walk the ops too, follow links: `find -L`, `grep -R`; reading still runs nothing). Large collections list a first page; their `description` says how
many exist, and any one is reachable by name (`cd tracker/issues/42`).
A host's child named like an entry's own files (`description`, `ref`, `body`, `ops`) shows
with a `~` added (`ops~`); its `description` says what it is really called.
{titled}


## Read content: `body`
An object with content has a file `body`: a file's exact bytes, an issue's markdown, a
comment's text, a row as JSON, a resource, a message: the stored bytes, no more (text
saved without a final newline reads back without one). Read it like any file, any tool:
`cat tracker/issues/42/body`, `grep -r WORD files/`, `grep -l crash tracker/issues/*/body`,
`less`, `tail -c`, `cmp`, `cp`. Reading runs nothing and records nothing. Only a file's
body is read by offset; any other shows at most 16 MiB and a longer one ends with a line
`[body cut here: …]`.
A `body` you may change is writable (`-rw-`): `cat > body`, `printf … >> body`, an editor's
save. What the file holds when you close it replaces the content as ONE call of the op the
host names (the files host's `write`, the tracker's `edit_body`), with its guard, its run in
`ops/NAME/runs/` and its errno at the close. `sed -i` cannot work here (it needs a temporary
file beside it); write the new content instead. `test -w` tells the truth; so do `mtime`s.

## Check, then act
- `cat ops/NAME/description` and `cat ops/NAME/schema`: what the op does, its arguments.
- `cat ops/NAME/guard`: `allowed` or `blocked`, then one line per condition. A `✗` line names
  what would satisfy it (a path or another op) or says you cannot.
- Call by writing arguments into `call`, then read `result`:
  `echo '{{"reason":"fixed in 1.2"}}' > ops/close/call && cat ops/close/result`
  Arguments: a JSON object, `key=value` lines, or plain text when the op takes a single
  string (`echo "fixed in 1.2" > ops/close/call`). No arguments: `echo > ops/NAME/call`.
  Text whose first line is `KEY=…` with KEY a field of the op is read as key=value lines;
  to send such text exactly, make the first line `--` (`printf -- '--\ntimeout=30 is not
  it\n' > call`) or send JSON. The op's `schema` says so where it applies.
  Everything you write through one `>` (several lines, `{{ …; }} >`, a heredoc) is ONE call.
  Opening and closing `call` without writing runs nothing.
- Errors: EINVAL bad arguments, EPERM a guard is blocked, EACCES policy forbids, EIO the
  backend failed, ETIMEDOUT you waited `call_timeout_ms` and the call goes on as a run (see
  Long calls), ECANCELED its run was cancelled, EFBIG too large, EINPROGRESS it waits for a
  person's approval. The words are always in `result` (yours: results are kept per
  terminal session).
- Who sees the errno: an op blocked whatever you write is refused when `call` is opened,
  so every shell prints it; JSON and a lone newline fail in the write, so bash prints
  `write error: …`. Plain text and key=value lines run when the file is closed, and bash's
  builtin echo/printf ignore close errors: after a text call, `cat result`.
- `{wip} call PATH [ARGS]` does it in one step, prints the result and exits 1 on error.

## A person's sign-off
A guard line `✗ sign_off: needs a person's sign-off` means the call will not run now (it
is not a review approval, which a pull request's own guard lines and ops are about): it
waits as a pending run (the write fails with EINPROGRESS, "Operation now in progress"),
and `result` prints the run's path. A person decides outside this mount, not from your
terminal session: `{wip} approve RUN` runs it (checked again then), `{wip} deny RUN`
drops it. Read `RUN/status` and `RUN/result` later for the outcome; `.wip/pending` lists
what waits. `✗ policy: denied by rule N` means never (EACCES).

## Long calls
A call that outlives `call_timeout_ms` answers ETIMEDOUT and goes on as its run; `result`
names it (`run: …/ops/NAME/runs/3`). `cat RUN/progress` shows how far it got,
`echo > RUN/ops/wait/call && cat RUN/ops/wait/result` waits for its result (ETIMEDOUT again
if it still runs: wait again), `echo > RUN/ops/cancel/call` stops it (your own session's
runs, or any if you own the mount). `.wip/runs` lists runs with their paths, those in
flight first; `{wip} call --wait PATH ARGS` waits through it all.

## Results
A call that creates or finds objects prints their absolute paths in `result`, one per line
with a tab and their description. Every call is kept in `ops/NAME/runs/ID/`, numbered per op
from 1 (description, args, status, progress, result, guard, caller, discovered/ links, ops
`wait` and `cancel`). `runs/` is not listed by `ls ops/NAME/` so that `find` and `grep -r`
stay out of it, but it is there: `ls ops/NAME/runs/` lists the newest 1000. Reading never
runs anything.

## More
`ops/resolve`: give a ref, get every path where that object appears.
`ops/locate`: words → known entries (everything looked at or discovered) that match.
`.wip/known`: the known world. `.wip/events`: every change as JSON lines (`tail -f` it;
`ops/events` resumes from a cursor). `.wip/log`: the recent calls. `.wip/config`: the
effective manifest (secrets redacted). `.wip/stats`: nodes held, calls made.
`.wip/pending`: runs waiting for a person's sign-off. `.wip/status`: the hosts (ready,
starting, down), calls and runs in flight, the journal's size (`{wip} status DIR` prints
it). `.wip/runs`: runs with their paths, those in flight first (`{wip} runs DIR`).
This world is mounted at {mount}.
{shared}"#,
        description = world.description(),
        wip = wip_command(),
        titled = if world.settings().titled {
            "Titled names are on, for people: collections list `42 Crash when config is missing`;\n\
             the bare `42` is the same object, and every path a result prints is the bare one.\n\
             In a shell loop, quote names (`for d in *; do cat \"$d/description\"; done`).\n"
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
