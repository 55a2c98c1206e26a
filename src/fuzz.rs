//! Fuzz targets for every parser that reads input from outside: call documents against a
//! schema, name escaping, the db host's names and keys, the host and agent protocol
//! readers, the manifest and its redaction. A target panics on a crash or a broken
//! property; `wip-fuzz` (stable Rust, no instrumentation) feeds each one generated inputs,
//! mutated from seeds that cover its grammar, and counts the panics.

use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::{json, Value};

use crate::host::names;
use crate::world::call::args;

/// One parser under test.
pub struct Target {
    pub name: &'static str,
    /// Inputs that reach deep into the grammar; mutations start from them.
    pub seeds: &'static [&'static str],
    /// Panics if the input makes the parser crash or break a property.
    pub run: fn(&[u8]),
}

fn schemas() -> [Value; 4] {
    [
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": false}),
        json!({"type": "object", "properties": {
            "path": {"type": "string", "minLength": 1},
            "offset": {"type": "integer", "minimum": 1},
            "replace_all": {"type": "boolean"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "mode": {"type": ["boolean", "string"]},
            "ratio": {"type": "number"},
            "any": {}},
            "required": ["path"], "additionalProperties": false}),
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object", "properties": {"title": {"type": "string"},
               "body": {"type": "string"}}, "required": ["title"]}),
    ]
}

fn args_target(input: &[u8]) {
    let schemas = schemas();
    let (pick, doc) = input.split_first().unwrap_or((&0, &[]));
    let schema = &schemas[usize::from(*pick) % schemas.len()];
    // What decides whether a write runs now or waits for more (production's own test).
    let _ = crate::world::call::shape(doc);
    let _ = args::looks_like_json(doc);
    if let Ok(v) = args::parse_and_validate(doc, schema) {
        assert!(v.is_object(), "arguments parsed to a non-object");
        // What validated once validates again from its JSON form.
        let again = args::parse_and_validate(v.to_string().as_bytes(), schema);
        assert_eq!(again.ok(), Some(v), "JSON form of parsed args differs");
    }
    if let Ok(text) = std::str::from_utf8(doc) {
        let types = ["boolean", "integer", "number", "array", "string"];
        let ty = types[usize::from(*pick) % types.len()].to_string();
        let _ = args::type_value(text, &[ty]);
        let _ = args::type_value(text, &[]);
    }
}

fn names_target(input: &[u8]) {
    let name = String::from_utf8_lossy(input);
    let escaped = names::escape(&name);
    assert!(!names::is_reserved(&escaped), "escape gave a reserved name");
    assert_eq!(
        names::unescape(&escaped).as_deref(),
        Some(&*name),
        "unescape∘escape ≠ id"
    );
    if let Some(host) = names::unescape(&name) {
        assert_eq!(names::escape(&host), name, "escape∘unescape ≠ id");
    }
    let _ = names::is_valid(&name);
    if let Some(n) = names::canonical_number::<u64>(&name) {
        assert_eq!(n.to_string(), name, "canonical number is not canonical");
    }
}

fn db_keys_target(input: &[u8]) {
    crate::hosts::db::keys::fuzz_one(input);
}

fn host_protocol_target(input: &[u8]) {
    use crate::hosts::exec::protocol::Incoming;
    for line in String::from_utf8_lossy(input).lines() {
        if let Ok(Incoming::Response { outcome: Ok(v), .. }) = Incoming::parse(line) {
            // What a host answers for an entry.
            let _ = serde_json::from_value::<crate::hosts::exec::protocol::WireEntry>(v)
                .map(|e| e.into_info());
        }
    }
}

fn agent_protocol_target(input: &[u8]) {
    let mut reader = crate::hosts::agent::turn::Reader::default();
    for line in String::from_utf8_lossy(input).split_inclusive('\n') {
        let _ = reader.line(line);
    }
    let _ = reader.answer();
}

fn manifest_target(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let parsed = crate::manifest::Manifest::parse(&text, "fuzz");
    if let Ok(m) = &parsed {
        let _ = m.policy();
    }
    let shown = crate::secrets::redact_manifest(&text);
    assert!(
        !crate::secrets::has_token(&shown),
        "a token survived redaction"
    );
    if toml::from_str::<toml::Table>(&text).is_ok() {
        assert!(
            toml::from_str::<toml::Table>(&shown).is_ok(),
            "redaction broke a valid manifest"
        );
    }
}

/// Every target, with seeds.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "args",
            seeds: &[
                "\x00{\"text\": \"hi\"}",
                "\x01path=a.txt\noffset=3\nreplace_all=true\nlabels=a,b\nmode=maybe\nratio=1.5e3\nany={\"x\":[1]}\n",
                "\x01{\"path\": \"x\", \"labels\": [\"a\"], \"mode\": false}",
                "\x03title=Crash\nbody=line one\nline two\n\n",
                "\x00fixed in 1.2\n",
                "\x02\n",
                "\x01path=\u{e9}\r\noffset=007\n",
            ],
            run: args_target,
        },
        Target {
            name: "names",
            seeds: &["ops", "ops~", "description~~", "README.md", ".wip~", "42", "007", "a/b"],
            run: names_target,
        },
        Target {
            name: "db_keys",
            seeds: &["\x00%", "\x014711", "\x02%2E%2E", "\x03a%2Cb,%N", "\x04%X00ff,-3", "\x011.5e300,x"],
            run: db_keys_target,
        },
        Target {
            name: "host_protocol",
            seeds: &[
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"description\":\"d\",\"ref\":\"r\",\"modified_ms\":5}}",
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32003,\"message\":\"no\"}}",
                "{\"jsonrpc\":\"2.0\",\"method\":\"changed\",\"params\":{\"paths\":[[\"a\"]]}}",
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}",
            ],
            run: host_protocol_target,
        },
        Target {
            name: "agent_protocol",
            seeds: &[
                "{\"role\":\"status\",\"content\":\"thinking\"}\n{\"role\":\"assistant\",\"content\":\"hi\"}\n",
                "plain answer\nsecond line\n",
                "\n\n{\"content\": 5}\nnot json\n",
            ],
            run: agent_protocol_target,
        },
        Target {
            name: "manifest",
            seeds: &[
                "[world]\nname = \"w\"\ncall_timeout_ms = 1000\n[[host]]\nkind = \"files\"\npath = \"files\"\nroot = \".\"\n",
                "[[host]]\nkind = \"agents\"\npath = \"a\"\ncommand = [\"x\", \"--api-key\", \"sk-abcdefghijkl\"]\nenv = { K = \"v\" }\n",
                "[[policy]]\nmatch = \"tracker/pulls/*/ops/merge\"\naction = \"approve\"\nexpires_after = \"1h30m\"\napprovers = [\"dana\", 0]\n",
                "[identity]\nuser = \"dana\"\nrole = \"maintainer\"\n[state]\nurl = \"postgresql://u:pw@h/db\"\n",
            ],
            run: manifest_target,
        },
    ]
}

/// A small, fast, seeded generator (xorshift64*): the same seed gives the same inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to the grammars: delimiters, escapes, quotes, and UTF-8 edges.
const INTERESTING: &[&[u8]] = &[
    b"=",
    b"\n",
    b"\r\n",
    b",",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b"%",
    b"%2",
    b"%N",
    b"%X",
    b"~",
    b"/",
    b"\0",
    b"..",
    b"-",
    b"e",
    b"1e999",
    b"-0",
    b"null",
    b"true",
    b"\xff",
    "\u{e9}".as_bytes(),
    "\u{1F600}".as_bytes(),
    b"\"\"\"",
    b"'''",
    b"[[host]]\n",
    b" = ",
    b"ghp_abcdefghijklmnopqrst",
    b"sk-",
    b"AKIA",
    b"9223372036854775808",
];

/// One input: a seed (or two spliced), mutated a few times.
pub fn generate(seeds: &[&str], rng: &mut Rng) -> Vec<u8> {
    let mut out: Vec<u8> = seeds
        .get(rng.below(seeds.len()))
        .map(|s| s.as_bytes().to_vec())
        .unwrap_or_default();
    for _ in 0..1 + rng.below(6) {
        let at = rng.below(out.len() + 1);
        match rng.below(7) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 if !out.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(out.len());
                out.drain(at.min(end)..end);
            }
            2 => {
                let piece = INTERESTING[rng.below(INTERESTING.len())];
                out.splice(at..at, piece.iter().copied());
            }
            3 => {
                let b = (rng.next_u64() & 0xff) as u8;
                out.insert(at, b);
            }
            4 if !seeds.is_empty() => {
                let other = seeds[rng.below(seeds.len())].as_bytes();
                let from = rng.below(other.len() + 1);
                out.truncate(at);
                out.extend_from_slice(&other[from..]);
            }
            5 if !out.is_empty() => {
                // Repeat a slice: deep nesting and long runs.
                let end = (at + 1 + rng.below(16)).min(out.len());
                let slice = out[at.min(end)..end].to_vec();
                for _ in 0..rng.below(64) {
                    out.splice(at..at, slice.iter().copied());
                }
            }
            _ => {
                let n = rng.below(16);
                out.extend((0..n).map(|_| (rng.next_u64() & 0x7f) as u8));
            }
        }
    }
    out
}

/// Inputs that once broke a target, kept in `fuzz/regressions/TARGET.txt` (one JSON
/// string per line, written by `wip-fuzz` when it finds a crash): the suite replays every
/// one, so a failure found once is never found again by chance.
pub fn regressions(target: &str) -> Vec<Vec<u8>> {
    let text = match target {
        "args" => include_str!("../fuzz/regressions/args.txt"),
        "names" => include_str!("../fuzz/regressions/names.txt"),
        "db_keys" => include_str!("../fuzz/regressions/db_keys.txt"),
        "host_protocol" => include_str!("../fuzz/regressions/host_protocol.txt"),
        "agent_protocol" => include_str!("../fuzz/regressions/agent_protocol.txt"),
        "manifest" => include_str!("../fuzz/regressions/manifest.txt"),
        _ => "",
    };
    parse_regressions(text)
}

/// The inputs of a regression file: lines that are JSON strings (others are comments).
pub fn parse_regressions(text: &str) -> Vec<Vec<u8>> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<String>(l.trim()).ok())
        .map(String::into_bytes)
        .collect()
}

/// The line a regression file keeps for `input` (lossy for bytes that are not UTF-8, as
/// the targets read their input).
pub fn regression_line(input: &[u8]) -> String {
    serde_json::Value::String(String::from_utf8_lossy(input).into_owned()).to_string()
}

/// What a run of one target found.
pub struct Report {
    pub inputs: u64,
    pub crashes: u64,
    /// The first input that crashed, and why.
    pub first: Option<(Vec<u8>, String)>,
}

/// Feed `n` generated inputs to `target`.
pub fn run(target: &Target, n: u64, seed: u64) -> Report {
    let mut rng = Rng::new(seed);
    let mut report = Report {
        inputs: 0,
        crashes: 0,
        first: None,
    };
    for _ in 0..n {
        let input = generate(target.seeds, &mut rng);
        report.inputs += 1;
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| (target.run)(&input))) {
            report.crashes += 1;
            if report.first.is_none() {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                report.first = Some((input, why));
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fixed seeds: the suite checks the same inputs on every run (a failure in CI is
    /// never a roll of the dice); a failure found is kept in `proptest-regressions/` and
    /// tried first from then on. `wip-fuzz` is the one that explores.
    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 2000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x77_69_70),
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::SourceParallel(
                    "proptest-regressions",
                ),
            )),
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn every_target_survives_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            for t in targets() {
                (t.run)(&bytes);
            }
        }

        #[test]
        fn every_target_survives_text(text in "\\PC{0,200}") {
            for t in targets() {
                (t.run)(text.as_bytes());
            }
        }

        #[test]
        fn unescape_of_escape_is_identity(name in "(ops|description|ref|README\\.md|\\.wip|[a-z]{0,3})~{0,3}[a-z~]{0,2}") {
            prop_assert_eq!(names::unescape(&names::escape(&name)), Some(name.clone()));
        }

        #[test]
        fn key_value_forms_of_an_object_parse_back_to_it(
            path in "[^\n\r=]{1,30}",
            offset in 1u64..1_000_000,
            replace_all in any::<bool>(),
            labels in proptest::collection::vec("[a-z0-9 ]{1,8}", 1..4),
        ) {
            let path = path.trim().to_string();
            prop_assume!(!path.is_empty());
            let schema = &schemas()[1];
            let object = json!({"path": path, "offset": offset, "replace_all": replace_all, "labels": labels});
            let lines = format!(
                "path={path}\noffset={offset}\nreplace_all={replace_all}\nlabels={}\n",
                serde_json::to_string(&labels).unwrap()
            );
            let parsed = args::parse_and_validate(lines.as_bytes(), schema).unwrap();
            prop_assert_eq!(parsed, object);
        }

        #[test]
        fn db_names_and_keys_round_trip(text in "\\PC{0,40}", pick in any::<u8>()) {
            let mut input = vec![pick];
            input.extend_from_slice(text.as_bytes());
            crate::hosts::db::keys::fuzz_one(&input);
        }

        #[test]
        fn redacted_manifests_hold_no_env_value(value in "[a-zA-Z0-9_-]{6,30}", name in "[A-Z_]{1,12}") {
            let text = format!("[[host]]\nkind = \"mcp\"\npath = \"m\"\ncommand = [\"srv\"]\nenv = {{ {name} = \"{value}\" }}\n");
            let shown = crate::secrets::redact_manifest(&text);
            prop_assert!(!shown.contains(&format!("\"{value}\"")), "{}", shown);
        }
    }

    #[test]
    fn every_kept_regression_input_passes() {
        let mut replayed = 0;
        for t in targets() {
            for input in regressions(t.name) {
                let outcome = catch_unwind(AssertUnwindSafe(|| (t.run)(&input)));
                assert!(
                    outcome.is_ok(),
                    "{}: the kept input {} breaks it again",
                    t.name,
                    regression_line(&input)
                );
                replayed += 1;
            }
        }
        assert!(replayed > 0, "no regression inputs were found");
    }

    #[test]
    fn regression_lines_round_trip() {
        let input = "url = \"postgresql://u:pw\t@h/db\"\n\u{1b}".as_bytes();
        assert_eq!(
            parse_regressions(&regression_line(input)),
            vec![input.to_vec()]
        );
        assert!(parse_regressions("# a comment\n\n").is_empty());
    }

    #[test]
    fn the_driver_counts_inputs_and_catches_crashes() {
        let crashy = Target {
            name: "crashy",
            seeds: &["a"],
            run: |b| assert!(!b.contains(&b'='), "found ="),
        };
        let r = run(&crashy, 2000, 7);
        assert_eq!(r.inputs, 2000);
        assert!(r.crashes > 0 && r.first.is_some());
        for t in targets() {
            let r = run(&t, 300, 1);
            assert_eq!(r.crashes, 0, "{}: {:?}", t.name, r.first);
        }
    }
}
