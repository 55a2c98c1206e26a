#!/usr/bin/env python3
"""shell_helper: an example agent command for wip's agents host (standard library only).

This is an example of the format, not a language model: it answers "how do I ..." questions
about the shell from a small table of recipes, deterministically, and says whether the
command it suggests is installed here. Any program that speaks the same format can be
plugged in the same way (`[[host]] kind = "agent"`, `command = [...]`), including a wrapper
around any LLM command-line tool.

The format (docs/agent-protocol.md): stdin holds the conversation, one JSON object per line,
{"role": "user" | "agent", "content": "..."}, oldest first; stdout answers with JSON lines:
{"status": "..."} while working (shown in the conversation's description) and
{"content": "..."} pieces of the answer, concatenated. Exit 0 when done; on failure exit
non-zero with the reason on stderr.

In a conversation, "another" (or "more", "next") gives the next best recipe for the
question before it.
"""

import json
import re
import shutil
import sys

# (keywords, command, explanation)
RECIPES = [
    ({"count", "lines", "line", "wc"}, "wc -l FILE",
     "prints the number of newline characters in FILE (`wc -w` counts words, `wc -c` bytes)."),
    ({"count", "words", "word"}, "wc -w FILE", "prints the number of words in FILE."),
    ({"find", "files", "name", "named", "file"}, "find DIR -name 'PATTERN'",
     "walks DIR and prints every path whose name matches the shell PATTERN ('*.rs')."),
    ({"search", "text", "grep", "contain", "containing", "contains", "word", "files"},
     "grep -rn 'TEXT' DIR",
     "prints every line holding TEXT under DIR with its file and line number (-i ignores case)."),
    ({"replace", "substitute", "sed", "text"}, "sed -i 's/OLD/NEW/g' FILE",
     "replaces every OLD with NEW in FILE, in place (drop -i to print instead)."),
    ({"sort", "lines", "order"}, "sort FILE", "prints FILE's lines in order (-n numeric, -r reverse)."),
    ({"unique", "duplicate", "duplicates", "dedupe", "uniq"}, "sort FILE | uniq -c",
     "counts each distinct line; `sort -u FILE` just drops repeats."),
    ({"disk", "space", "size", "usage", "big", "largest"}, "du -sh * | sort -h",
     "shows the size of each entry of the current directory, largest last."),
    ({"free", "disk", "space", "filesystem", "df"}, "df -h",
     "shows used and free space of every mounted file system."),
    ({"process", "processes", "running", "ps"}, "ps aux", "lists every process with its owner, CPU and memory."),
    ({"kill", "stop", "process"}, "kill PID", "asks process PID to stop (SIGTERM); `kill -9 PID` forces it."),
    ({"first", "head", "beginning", "top"}, "head -n 20 FILE", "prints the first 20 lines of FILE."),
    ({"last", "tail", "end", "follow"}, "tail -n 20 FILE",
     "prints the last 20 lines of FILE; `tail -f` keeps following it as it grows."),
    ({"permissions", "executable", "chmod", "mode"}, "chmod +x FILE", "makes FILE executable."),
    ({"archive", "tar", "compress", "extract"}, "tar czf OUT.tar.gz DIR",
     "packs DIR into a gzip-compressed archive; `tar xzf OUT.tar.gz` unpacks it."),
    ({"compare", "difference", "diff", "differences"}, "diff -u OLD NEW",
     "prints the lines that differ between two files as a unified diff."),
]

FOLLOW_UPS = {"another", "more", "next", "else", "other"}


def words(text):
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def ranked(question):
    asked = words(question)
    scored = [(len(asked & keys), i) for i, (keys, _, _) in enumerate(RECIPES)]
    return [i for score, i in sorted(scored, key=lambda s: (-s[0], s[1])) if score > 0]


def say(obj):
    print(json.dumps(obj), flush=True)


def main():
    try:
        messages = [json.loads(line) for line in sys.stdin if line.strip()]
    except json.JSONDecodeError as e:
        print(f"stdin is not JSON lines: {e}", file=sys.stderr)
        return 2
    user = [m["content"] for m in messages if m.get("role") == "user"]
    if not user:
        print("the conversation holds no user message", file=sys.stderr)
        return 2
    # A follow-up asks again about the last real question, one recipe further down.
    question, skip = user[-1], 0
    while words(question) & FOLLOW_UPS and len(words(question)) <= 3 and len(user) > skip + 1:
        skip += 1
        question = user[-1 - skip]
    say({"status": f"matching {len(RECIPES)} recipes"})
    order = ranked(question)
    if skip >= len(order):
        say({"content": "I have no other recipe for that. Ask about counting, finding, "
                        "searching, replacing, sorting, disk space, processes or archives."})
        return 0
    _, command, explanation = RECIPES[order[skip]]
    program = command.split()[0]
    where = shutil.which(program)
    installed = f"`{program}` is installed here ({where})." if where else \
        f"`{program}` is not installed on this machine."
    say({"content": f"{command}\n"})
    say({"content": f"  {explanation}\n"})
    say({"content": installed})
    if len(order) > skip + 1:
        say({"content": "\n(say \"another\" for a different way)"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
