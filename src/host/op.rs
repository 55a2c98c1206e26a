//! One declaration per op: its name, which entries offer it, its arguments as a typed value
//! (the JSON Schema is generated from the type), its guard and its run. A host lists its
//! ops once in an `Ops` table; `ops/`, `guard` and `call` are all answered from it, so an
//! op's name appears in one place and its arguments are validated once, into the type its
//! handler receives.
//!
//! `H` is the host, `N` the host's parsed node (what a path names), `C` what a call runs
//! against (a database transaction, or `()`).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::{CallOutcome, Condition, Guard, HostError, HostResult, OpSpec};

/// The arguments of an op that takes none.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A required line of text: not blank; a trailing newline (what `echo` adds) is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text(pub String);

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(serde::de::Error::custom("must not be empty"));
        }
        Ok(Text(s.trim_end_matches(['\n', '\r']).to_string()))
    }
}

impl JsonSchema for Text {
    fn schema_name() -> Cow<'static, str> {
        "Text".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "string", "minLength": 1})
    }
}

/// A list of names (labels, users, paths): each one not blank, trimmed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names(pub Vec<String>);

impl Names {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let items = Vec::<String>::deserialize(d)?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let name = item.trim();
            if name.is_empty() {
                return Err(serde::de::Error::custom("names must not be empty"));
            }
            out.push(name.to_string());
        }
        Ok(Names(out))
    }
}

impl JsonSchema for Names {
    fn schema_name() -> Cow<'static, str> {
        "Names".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "array", "items": {"type": "string", "minLength": 1}})
    }
}

/// Free text that may be empty (a body, a description); the trailing newline `echo` adds
/// is dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prose(pub String);

impl Prose {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Prose {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(Prose(s.trim_end_matches(['\n', '\r']).to_string()))
    }
}

impl JsonSchema for Prose {
    fn schema_name() -> Cow<'static, str> {
        "Prose".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "string"})
    }
}

/// A whole number from `MIN` to `MAX` (a limit, a page): out of range is an error that
/// says the range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = u64::deserialize(d)?;
        if (MIN..=MAX).contains(&n) {
            Ok(Bounded(n))
        } else {
            Err(serde::de::Error::custom(format!(
                "must be {MIN}..{MAX}, not {n}"
            )))
        }
    }
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Bounded<MIN, MAX> {
    fn schema_name() -> Cow<'static, str> {
        format!("Bounded{MIN}to{MAX}").into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": MIN, "maximum": MAX})
    }
}

/// How serde spells a unit variant (`Method::Squash` → `squash`): the schema, the
/// arguments, results and a backend share that one spelling.
pub fn spelled(v: impl serde::Serialize) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The strict JSON Schema of `A`: an object schema, subschemas inlined (an agent reads
/// it in one piece), without the generator's `$schema` and `title`.
pub fn schema_of<A: JsonSchema>() -> Value {
    let schema = schemars::generate::SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<A>();
    let mut value = schema.to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("title");
        map.remove("description");
        map.entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
        // Always say what is required, even nothing: readers need not guess.
        map.entry("required")
            .or_insert_with(|| Value::Array(Vec::new()));
        let required: Vec<Value> = map
            .get("required")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if let Some(Value::Object(props)) = map.get_mut("properties") {
            for (name, prop) in props.iter_mut() {
                if !required.contains(&Value::String(name.clone())) {
                    not_null(prop);
                }
            }
        }
    }
    value
}

/// An optional argument (`Option<T>`) as the schema of `T` alone: schemars makes it
/// nullable, but an agent leaves an argument out rather than sending `null`.
fn not_null(prop: &mut Value) {
    let Some(p) = prop.as_object_mut() else {
        return;
    };
    let null = Value::String("null".into());
    if let Some(Value::Array(types)) = p.get_mut("type") {
        types.retain(|t| *t != null);
        if let [only] = types.as_slice() {
            let only = only.clone();
            p.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = p.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if p.get("default").is_some_and(Value::is_null) {
        p.remove("default");
    }
    let null_schema = serde_json::json!({"type": "null"});
    if let Some(Value::Array(any)) = p.get_mut("anyOf") {
        any.retain(|s| *s != null_schema);
        if let [only] = any.as_slice() {
            if let Some(inner) = only.as_object().cloned() {
                p.remove("anyOf");
                for (k, v) in inner {
                    p.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// `args` as `A`, or `InvalidArgs` that names the op and the argument at fault. A bare
/// `null` counts as `{}` (ops without required arguments).
pub fn parse<A: DeserializeOwned>(op: &str, args: &Value) -> HostResult<A> {
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::Object(_) => args.clone(),
        other => {
            return Err(HostError::InvalidArgs(format!(
                "arguments of {op} must be a JSON object, not {other}"
            )))
        }
    };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let at = e.path().to_string();
        let inner = e.into_inner().to_string();
        // An unknown field's path is the field itself: say it once.
        HostError::InvalidArgs(if at == "." || inner.starts_with("unknown field") {
            format!("arguments of {op}: {inner}")
        } else {
            format!("argument {at} of {op}: {inner}")
        })
    })
}

type GuardFn<H, N, C> =
    Box<dyn Fn(&H, &C, &N, Option<&Value>) -> HostResult<Vec<Condition>> + Send + Sync>;
type RunFn<H, N, C> = Box<dyn Fn(&H, &C, &N, &Value) -> HostResult<CallOutcome> + Send + Sync>;

/// An op's guard: its conditions on the node now, with the typed arguments when known.
pub type GuardOf<H, N, C, A> = fn(&H, &C, &N, Option<&A>) -> HostResult<Vec<Condition>>;

/// One op, declared once, with typed arguments `A`.
pub struct Decl<H, N, C, A> {
    pub name: &'static str,
    /// Whether the entry `N` offers it.
    pub offers: fn(&N) -> bool,
    /// One line for `ops/NAME/description`: what it does, its arguments in brief.
    pub describe: fn(&N) -> String,
    /// Its preconditions now; with arguments, those that depend on them too.
    pub guard: GuardOf<H, N, C, A>,
    /// What a call does once the guard holds.
    pub run: fn(&H, &C, &N, A) -> HostResult<CallOutcome>,
}

/// An op with its arguments' type erased, as an `Ops` table holds it.
pub struct Op<H, N, C> {
    name: &'static str,
    offers: fn(&N) -> bool,
    describe: fn(&N) -> String,
    schema: Value,
    guard: GuardFn<H, N, C>,
    run: RunFn<H, N, C>,
    /// It changes nothing (see `Decl::reading`).
    reads: bool,
}

impl<H, N, C, A> From<Decl<H, N, C, A>> for Op<H, N, C>
where
    H: 'static,
    N: 'static,
    C: 'static,
    A: DeserializeOwned + JsonSchema + 'static,
{
    fn from(d: Decl<H, N, C, A>) -> Self {
        let name = d.name;
        let (guard, run) = (d.guard, d.run);
        Op {
            name,
            offers: d.offers,
            describe: d.describe,
            schema: schema_of::<A>(),
            guard: Box::new(move |h, c, n, args| match args {
                None => guard(h, c, n, None),
                Some(raw) => guard(h, c, n, Some(&parse::<A>(name, raw)?)),
            }),
            run: Box::new(move |h, c, n, raw| {
                let args = parse::<A>(name, raw)?;
                let conditions = guard(h, c, n, Some(&args))?;
                let checked = Guard::new(conditions);
                if !checked.allowed() {
                    return Err(HostError::Blocked(checked));
                }
                run(h, c, n, args)
            }),
            reads: false,
        }
    }
}

impl<H, N, C, A> Decl<H, N, C, A>
where
    H: 'static,
    N: 'static,
    C: 'static,
    A: DeserializeOwned + JsonSchema + 'static,
{
    /// The op, declared as one that changes nothing: a host may run it without a write
    /// transaction or a run record (`Ops::reads_only`).
    pub fn reading(self) -> Op<H, N, C> {
        Op {
            reads: true,
            ..self.into()
        }
    }
}

/// A host's ops, in the order `ops/` lists them.
pub struct Ops<H, N, C = ()> {
    ops: Vec<Op<H, N, C>>,
}

impl<H, N, C> Ops<H, N, C> {
    pub fn new(ops: Vec<Op<H, N, C>>) -> Self {
        Ops { ops }
    }

    /// Names of every op declared, offered or not.
    pub fn all_names(&self) -> Vec<&'static str> {
        self.ops.iter().map(|o| o.name).collect()
    }

    /// Names of the ops `node` offers.
    pub fn names(&self, node: &N) -> Vec<&'static str> {
        self.offered(node).map(|o| o.name).collect()
    }

    fn offered<'a>(&'a self, node: &'a N) -> impl Iterator<Item = &'a Op<H, N, C>> + 'a {
        self.ops.iter().filter(move |o| (o.offers)(node))
    }

    /// Whether `name` is an op declared as changing nothing (`Decl::reading`).
    pub fn reads_only(&self, name: &str) -> bool {
        self.ops.iter().any(|o| o.name == name && o.reads)
    }

    /// What `ops/` shows for `node`.
    pub fn specs(&self, node: &N) -> Vec<OpSpec> {
        self.offered(node)
            .map(|o| OpSpec {
                output: None,
                name: o.name.to_string(),
                description: (o.describe)(node),
                schema: o.schema.clone(),
            })
            .collect()
    }

    /// The op `name` if `node` offers it; else `NotFound` listing what it offers.
    pub fn get(&self, node: &N, name: &str) -> HostResult<&Op<H, N, C>> {
        if let Some(op) = self.ops.iter().find(|o| o.name == name && (o.offers)(node)) {
            return Ok(op);
        }
        let offered = self.names(node);
        Err(HostError::NotFound(if offered.is_empty() {
            format!("no operation {name:?} here (this entry has none)")
        } else {
            format!(
                "no operation {name:?} here (offered: {})",
                offered.join(", ")
            )
        }))
    }

    /// The guard of `op` on `node` now (`args`: the conditions that depend on them too).
    pub fn guard(
        &self,
        host: &H,
        ctx: &C,
        node: &N,
        op: &str,
        args: Option<&Value>,
    ) -> HostResult<Guard> {
        let op = self.get(node, op)?;
        Ok(Guard::new((op.guard)(host, ctx, node, args)?))
    }

    /// Call `op`: its arguments parsed into their type, its guard checked with them
    /// (`Blocked` when it fails), then its run, all against `ctx` (a host that runs this
    /// inside a transaction checks the guard atomically with the change).
    pub fn call(
        &self,
        host: &H,
        ctx: &C,
        node: &N,
        op: &str,
        args: &Value,
    ) -> HostResult<CallOutcome> {
        let op = self.get(node, op)?;
        (op.run)(host, ctx, node, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;
    use serde_json::json;

    #[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
    #[serde(rename_all = "lowercase")]
    enum Method {
        #[default]
        Merge,
        Squash,
    }

    #[derive(Debug, Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Merge {
        /// how to merge
        #[serde(default)]
        method: Method,
        /// why, one line
        title: Option<Text>,
        /// who
        #[serde(default)]
        users: Names,
    }

    struct Host;

    fn ops() -> Ops<Host, u32> {
        Ops::new(vec![
            Decl::<Host, u32, (), Merge> {
                name: "merge",
                offers: |n| *n > 1,
                describe: |n| format!("merge #{n}"),
                guard: |_, _, n, args| {
                    let squash = args.is_some_and(|a| a.method == Method::Squash);
                    Ok(vec![Condition::check("open", *n != 3 && !squash, "it is")])
                },
                run: |_, _, n, a| {
                    Ok(CallOutcome::text(format!(
                        "merged #{n} by {:?} for {:?} ({})",
                        a.method,
                        a.title.map(Text::into_string),
                        a.users.0.join(",")
                    )))
                },
            }
            .into(),
            Decl::<Host, u32, (), NoArgs> {
                name: "read",
                offers: |_| true,
                describe: |_| "read it".to_string(),
                guard: |_, _, _, _| Ok(vec![]),
                run: |_, _, _, _| Ok(CallOutcome::text("read")),
            }
            .into(),
        ])
    }

    #[test]
    fn the_schema_comes_from_the_type_and_is_strict() {
        let specs = ops().specs(&2);
        assert_eq!(specs.len(), 2);
        let s = &specs[0].schema;
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(
            s["properties"]["method"]["enum"],
            json!(["merge", "squash"])
        );
        assert_eq!(s["properties"]["method"]["default"], "merge");
        assert_eq!(s["properties"]["method"]["description"], "how to merge");
        assert_eq!(s["properties"]["users"]["items"]["minLength"], 1);
        assert!(s.get("$schema").is_none() && s.get("title").is_none());
        assert_eq!(s["required"], json!([]), "{s}");
        assert_eq!(specs[1].schema["properties"], json!({}));
        assert_eq!(specs[0].description, "merge #2");
    }

    #[test]
    fn only_entries_that_offer_an_op_have_it() {
        let ops = ops();
        assert_eq!(ops.names(&1), vec!["read"]);
        let err = ops.call(&Host, &(), &1, "merge", &json!({})).unwrap_err();
        assert_eq!(
            err,
            HostError::NotFound("no operation \"merge\" here (offered: read)".to_string())
        );
    }

    #[test]
    fn a_call_gets_typed_arguments_after_its_guard() {
        let ops = ops();
        let out = ops
            .call(
                &Host,
                &(),
                &2,
                "merge",
                &json!({"title": "x\n", "users": [" a "]}),
            )
            .unwrap();
        assert_eq!(out.result, "merged #2 by Merge for Some(\"x\") (a)");
        let blocked = ops.call(&Host, &(), &3, "merge", &Value::Null).unwrap_err();
        assert!(matches!(blocked, HostError::Blocked(_)));
        // The guard sees the arguments.
        let g = ops
            .guard(&Host, &(), &2, "merge", Some(&json!({"method": "squash"})))
            .unwrap();
        assert!(!g.allowed());
    }

    #[test]
    fn bad_arguments_name_the_op_and_the_argument() {
        let ops = ops();
        let cases = [
            (
                json!({"method": "octopus"}),
                "argument method of merge: unknown variant `octopus`",
            ),
            (
                json!({"title": "  "}),
                "argument title of merge: must not be empty",
            ),
            (
                json!({"users": ["a", ""]}),
                "argument users of merge: names must not be empty",
            ),
            (
                json!({"colour": 1}),
                "arguments of merge: unknown field `colour`",
            ),
            (json!([1]), "arguments of merge must be a JSON object"),
        ];
        for (args, words) in cases {
            match ops.call(&Host, &(), &2, "merge", &args) {
                Err(HostError::InvalidArgs(m)) => assert!(m.starts_with(words), "{m}"),
                other => panic!("{args}: {other:?}"),
            }
        }
        let err = ops
            .call(&Host, &(), &2, "read", &json!({"x": 1}))
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `x`"), "{err}");
    }

    #[test]
    fn bounded_numbers_and_prose_check_themselves() {
        #[derive(Debug, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        struct Page {
            limit: Bounded<1, 100>,
            #[serde(default)]
            #[schemars(with = "Prose")]
            note: Option<Prose>,
        }
        let ok: Page = parse("page", &json!({"limit": 100, "note": "hi\n"})).unwrap();
        assert_eq!(ok.limit, Bounded(100));
        assert_eq!(ok.note.as_ref().map(Prose::as_str), Some("hi"));
        let empty: Page = parse("page", &json!({"limit": 1, "note": ""})).unwrap();
        assert_eq!(empty.note, Some(Prose(String::new())));
        match parse::<Page>("page", &json!({"limit": 0})) {
            Err(HostError::InvalidArgs(m)) => {
                assert_eq!(m, "argument limit of page: must be 1..100, not 0")
            }
            other => panic!("{other:?}"),
        }
        let s = schema_of::<Page>();
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Optional {
            /// a word
            #[serde(default)]
            word: Option<String>,
            #[serde(default)]
            method: Option<Method>,
            #[serde(default)]
            limit: Option<Bounded<1, 9>>,
            #[schemars(length(min = 1))]
            text: Option<String>,
        }
        let o = schema_of::<Optional>();
        assert_eq!(
            o["properties"]["word"],
            json!({"type": "string", "description": "a word"})
        );
        assert_eq!(
            o["properties"]["method"]["enum"],
            json!(["merge", "squash"])
        );
        assert_eq!(o["properties"]["method"]["type"], "string");
        assert!(o["properties"]["method"].get("default").is_none());
        assert_eq!(
            o["properties"]["limit"],
            json!({"type": "integer", "minimum": 1, "maximum": 9})
        );
        assert_eq!(
            o["properties"]["text"],
            json!({"type": "string", "minLength": 1})
        );
        assert_eq!(
            s["properties"]["limit"],
            json!({"type": "integer", "minimum": 1, "maximum": 100})
        );
        assert_eq!(s["properties"]["note"]["type"], "string");
        assert_eq!(s["required"], json!(["limit"]));
        assert_eq!(spelled(Method::Squash), "squash");
    }
}
