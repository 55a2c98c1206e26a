//! The tantivy side of the search host: schema, writing documents, BM25 queries, snippets.
//!
//! One tantivy document per (source, path): `key` (source NUL path, the delete term),
//! `source` (exact, for the `source` filter), `path` (stored), `title` and `text` (English
//! stemming, positions for phrases, stored for snippets and `read_body`), and `ident`:
//! the same text cut into identifiers kept whole (`pthread_barrier_wait` one token,
//! lowercased, not stemmed), as code search engines index code beside its words. A query
//! matches words in `title` and `text` and whole identifiers in `ident` (boosted, so an
//! exact identifier ranks first); a quoted identifier matches that identifier only.

use std::path::Path;

use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, QueryParser, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::snippet::{Snippet, SnippetGenerator};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::host::{Document, HostError, HostResult, OrFailed};

/// Boost of a title match over a text match.
const TITLE_BOOST: f32 = 2.0;
/// Boost of a whole identifier's match over its words' (`pthread_barrier_wait` over a
/// text holding `PTHREAD_BARRIER_WAIT_PRE`).
const IDENT_BOOST: f32 = 3.0;
/// The tokenizer of `ident`: runs of letters, digits and `_`, lowercased.
const IDENT_TOKENIZER: &str = "ident";
/// Length of the stored snippet of a hit (characters of text around the best match).
pub(super) const SNIPPET_CHARS: usize = 300;
/// Memory of the index writer (one thread; tantivy's minimum is 15 MB).
const WRITER_BYTES: usize = 32_000_000;

#[derive(Clone, Copy)]
struct Fields {
    key: Field,
    source: Field,
    path: Field,
    title: Field,
    text: Field,
    ident: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let stemmed = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer("en_stem")
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let identifiers = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(IDENT_TOKENIZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        key: b.add_text_field("key", STRING),
        source: b.add_text_field("source", STRING | STORED),
        path: b.add_text_field("path", STORED),
        title: b.add_text_field("title", stemmed.clone()),
        text: b.add_text_field("text", stemmed),
        ident: b.add_text_field("ident", identifiers),
    };
    (b.build(), fields)
}

/// One hit of a query, as stored with the result.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Hit {
    pub score: f32,
    /// World path of the host the document came from.
    pub source: String,
    /// Host-relative path, `/`-joined.
    pub path: String,
    pub title: String,
    /// Text around the best match, matched words in `**…**`.
    pub snippet: String,
    /// The line of the text the best match is on (1-based), where it can be told.
    pub line: Option<u32>,
}

/// Register `ident`'s tokenizer on an index (it is not stored in the index itself).
fn register_tokenizers(index: &Index) -> tantivy::Result<()> {
    use tantivy::tokenizer::{LowerCaser, RegexTokenizer, TextAnalyzer};
    let words = RegexTokenizer::new(r"[A-Za-z0-9_]+")?;
    index.tokenizers().register(
        IDENT_TOKENIZER,
        TextAnalyzer::builder(words).filter(LowerCaser).build(),
    );
    Ok(())
}

/// Whether a word is an identifier a code search keeps whole (it joins words with `_`).
fn is_identifier(word: &str) -> bool {
    word.contains('_')
        && word.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && word.chars().any(|c| c.is_ascii_alphanumeric())
}

/// The query as the parser gets it: a quoted identifier (`"pthread_barrier_wait"`)
/// searches `ident` alone, so it matches that identifier only (its words would match any
/// identifier that holds them, `_VG_USERREQ__HG_PTHREAD_BARRIER_WAIT_PRE`).
fn with_identifiers(query: &str) -> String {
    let mut out = String::with_capacity(query.len() + 16);
    let mut rest = query;
    while let Some(start) = rest.find('"') {
        let (before, after) = rest.split_at(start);
        let Some(end) = after[1..].find('"') else {
            break;
        };
        let phrase = &after[1..=end];
        out.push_str(before);
        let field_given = before.ends_with(':');
        if !field_given && is_identifier(phrase) {
            out.push_str(&format!("ident:\"{}\"", phrase.to_lowercase()));
        } else {
            out.push_str(&after[..end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The identifiers a query names, lowercased (to find the line of a match on them).
fn identifiers_in(query: &str) -> Vec<String> {
    query
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| is_identifier(w))
        .map(str::to_lowercase)
        .collect()
}

/// The open index and its reader.
pub(super) struct Engine {
    index: Index,
    reader: IndexReader,
    f: Fields,
}

/// What a failed index read says it was at.
const INDEX: &str = "search index";

pub(super) fn doc_key(source: &str, path: &str) -> String {
    format!("{source}\0{path}")
}

impl Engine {
    /// Open the index in `dir`, creating it, or rebuilding it from nothing when it is
    /// unreadable or has another schema. The flag says the index started empty.
    pub(super) fn open(dir: &Path) -> tantivy::Result<(Engine, bool)> {
        let (schema, f) = schema();
        std::fs::create_dir_all(dir)?;
        let existing = match Index::open_in_dir(dir) {
            Ok(index) if index.schema() == schema => Some(index),
            Ok(_) => {
                tracing::warn!("search index {}: other schema, rebuilding", dir.display());
                None
            }
            Err(tantivy::TantivyError::OpenDirectoryError(e)) => {
                return Err(tantivy::TantivyError::OpenDirectoryError(e))
            }
            Err(e) => {
                if dir.join("meta.json").exists() {
                    tracing::warn!("search index {}: {e}; rebuilding", dir.display());
                }
                None
            }
        };
        let (index, fresh) = match existing {
            Some(index) => (index, false),
            None => {
                // The index is a cache of the sources: start over.
                std::fs::remove_dir_all(dir)?;
                std::fs::create_dir_all(dir)?;
                (Index::create_in_dir(dir, schema)?, true)
            }
        };
        register_tokenizers(&index)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok((Engine { index, reader, f }, fresh))
    }

    /// A writer, taking the index's lock (another process may hold it).
    pub(super) fn writer(&self) -> tantivy::Result<IndexWriter> {
        self.index.writer_with_num_threads(1, WRITER_BYTES)
    }

    /// Replace the document of (source, path).
    pub(super) fn put(
        &self,
        w: &IndexWriter,
        source: &str,
        path: &str,
        doc: &Document,
    ) -> tantivy::Result<()> {
        let key = doc_key(source, path);
        w.delete_term(Term::from_field_text(self.f.key, &key));
        let mut d = TantivyDocument::default();
        d.add_text(self.f.key, &key);
        d.add_text(self.f.source, source);
        d.add_text(self.f.path, path);
        d.add_text(self.f.title, &doc.title);
        d.add_text(self.f.text, &doc.text);
        d.add_text(self.f.ident, &doc.title);
        d.add_text(self.f.ident, &doc.text);
        w.add_document(d)?;
        Ok(())
    }

    pub(super) fn remove(&self, w: &IndexWriter, source: &str, path: &str) {
        w.delete_term(Term::from_field_text(self.f.key, &doc_key(source, path)));
    }

    pub(super) fn remove_source(&self, w: &IndexWriter, source: &str) {
        w.delete_term(Term::from_field_text(self.f.source, source));
    }

    /// Make committed changes visible to searches.
    pub(super) fn reload(&self) -> tantivy::Result<()> {
        self.reader.reload()
    }

    /// Refuse a query tantivy cannot parse, with its words.
    pub(super) fn check(&self, query: &str) -> HostResult<()> {
        self.parse(query).map(|_| ())
    }

    fn parse(&self, query: &str) -> HostResult<Box<dyn Query>> {
        let mut parser =
            QueryParser::for_index(&self.index, vec![self.f.title, self.f.text, self.f.ident]);
        parser.set_field_boost(self.f.title, TITLE_BOOST);
        parser.set_field_boost(self.f.ident, IDENT_BOOST);
        let rewritten = with_identifiers(query);
        parser.parse_query(&rewritten).map_err(|e| {
            // The strict parser only says "syntax error"; the lenient one says where.
            let (_, errors) = parser.parse_query_lenient(&rewritten);
            let words = match errors.first() {
                Some(first) => first.to_string(),
                None => e.to_string(),
            };
            HostError::InvalidArgs(format!("query {query:?}: {words}"))
        })
    }

    /// The best `limit` documents for `query` (in `source` only, if given), and how many
    /// match in all.
    pub(super) fn search(
        &self,
        query: &str,
        limit: usize,
        source: Option<&str>,
    ) -> HostResult<(usize, Vec<Hit>)> {
        let parsed = self.parse(query)?;
        let identifiers = identifiers_in(query);
        let query: Box<dyn Query> = match source {
            Some(s) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, parsed),
                (
                    Occur::Must,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.f.source, s),
                        IndexRecordOption::Basic,
                    )),
                ),
            ])),
            None => parsed,
        };
        let searcher = self.reader.searcher();
        let (top, total) = searcher
            .search(
                &query,
                &(TopDocs::with_limit(limit.max(1)).order_by_score(), Count),
            )
            .or_failed(INDEX)?;
        let mut snippets =
            SnippetGenerator::create(&searcher, &*query, self.f.text).or_failed(INDEX)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr).or_failed(INDEX)?;
            let get = |field: Field| {
                doc.get_first(field)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let text = get(self.f.text);
            let found = snippets.snippet_from_doc(&doc);
            let (snippet, at) = if found.is_empty() {
                match identifier_at(&text, &identifiers) {
                    // A whole identifier's match: the text around it.
                    Some((start, end)) => (around(&text, start, end), Some(start)),
                    // A title-only match: the start of the text.
                    None => (text.chars().take(SNIPPET_CHARS).collect(), None),
                }
            } else {
                let marked = marked(&found);
                let at = first_marked(&marked).and_then(|w| word_at(&text, &w));
                (marked, at)
            };
            let line = at.map(|i| {
                u32::try_from(text[..i].bytes().filter(|b| *b == b'\n').count() + 1)
                    .unwrap_or(u32::MAX)
            });
            hits.push(Hit {
                score,
                source: get(self.f.source),
                path: get(self.f.path),
                title: get(self.f.title),
                snippet,
                line,
            });
        }
        Ok((total, hits))
    }

    /// The indexed text of (source, path), if it is still in the index.
    pub(super) fn text_of(&self, source: &str, path: &str) -> HostResult<Option<String>> {
        let searcher = self.reader.searcher();
        let term = TermQuery::new(
            Term::from_field_text(self.f.key, &doc_key(source, path)),
            IndexRecordOption::Basic,
        );
        let top = searcher
            .search(&term, &TopDocs::with_limit(1).order_by_score())
            .or_failed(INDEX)?;
        let Some((_, addr)) = top.first() else {
            return Ok(None);
        };
        let doc: TantivyDocument = searcher.doc(*addr).or_failed(INDEX)?;
        Ok(doc
            .get_first(self.f.text)
            .and_then(|v| v.as_str())
            .map(str::to_string))
    }
}

/// Where the first of `identifiers` stands whole in `text` (byte range), case aside.
fn identifier_at(text: &str, identifiers: &[String]) -> Option<(usize, usize)> {
    let lower = text.to_lowercase();
    // Lowercasing ASCII keeps byte offsets; a text where it does not is searched as is.
    let hay = if lower.len() == text.len() {
        &lower
    } else {
        text
    };
    identifiers.iter().find_map(|id| {
        let mut from = 0;
        while let Some(i) = hay[from..].find(id.as_str()) {
            let start = from + i;
            let end = start + id.len();
            let edge = |c: Option<char>| !c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if edge(hay[..start].chars().next_back()) && edge(hay[end..].chars().next()) {
                return Some((start, end));
            }
            from = end;
        }
        None
    })
}

/// The text around bytes `start..end`, the match in `**…**`.
fn around(text: &str, start: usize, end: usize) -> String {
    let half = SNIPPET_CHARS / 2;
    let mut from = start.saturating_sub(half);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = (end + half).min(text.len());
    while !text.is_char_boundary(to) {
        to += 1;
    }
    format!(
        "{}**{}**{}",
        &text[from..start],
        &text[start..end],
        &text[end..to]
    )
}

/// The first word a snippet marks.
fn first_marked(snippet: &str) -> Option<String> {
    let start = snippet.find("**")? + 2;
    let len = snippet[start..].find("**")?;
    Some(snippet[start..start + len].to_string())
}

/// Where `word` first stands whole in `text` (byte offset), case aside.
fn word_at(text: &str, word: &str) -> Option<usize> {
    identifier_at(text, &[word.to_lowercase()]).map(|(s, _)| s)
}

/// A snippet's fragment with the matched words in `**…**`.
fn marked(snippet: &Snippet) -> String {
    let fragment = snippet.fragment();
    let mut out = String::with_capacity(fragment.len() + 16);
    let mut at = 0;
    for range in snippet.highlighted() {
        let (Some(before), Some(word)) = (
            fragment.get(at..range.start),
            fragment.get(range.start..range.end),
        ) else {
            continue;
        };
        out.push_str(before);
        out.push_str("**");
        out.push_str(word);
        out.push_str("**");
        at = range.end;
    }
    out.push_str(fragment.get(at..).unwrap_or_default());
    out
}
