#!/bin/sh
# A key-value store as a wip host, in POSIX shell with jq (docs/host-protocol.md): each key
# is a file in DIR, each an entry whose `body` is its value.
#
#   [[host]]
#   kind = "exec"
#   path = "kv"
#   command = ["sh", "examples/hosts/kv.sh", "/var/lib/kv"]
#
# The root offers set(key, value); a key offers set_value(value) (writing its `body` calls
# it) and delete(). A key whose file has no write bit (chmod a-w) is locked: its guard says so
# and the host refuses to change it. KV_READONLY=1 in the environment refuses every change
# as a policy (EACCES). A value that is not UTF-8 is given as base64 (the body holds the
# bytes) and cannot be written through `body`.
set -u
dir=${1:?usage: kv.sh DIR}
mkdir -p "$dir" || exit 1
command -v jq >/dev/null || { echo "kv.sh: jq is needed" >&2; exit 1; }

# reply ID JSON: a result.
reply() { printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$1" "$2"; }
# fail ID CODE MESSAGE [DATA]: an error (codes: docs/host-protocol.md, "Errors").
fail() {
  jq -cn --argjson id "$1" --argjson code "$2" --arg m "$3" --argjson d "${4:-null}" \
    '{jsonrpc:"2.0",id:$id,error:({code:$code,message:$m} + (if $d == null then {} else {data:$d} end))}'
}

# A key is a plain file name: letters, digits, dot, dash, underscore; not . or ..
valid_key() {
  case $1 in
    ''|.|..|*[!A-Za-z0-9._-]*) return 1 ;;
  esac
}

# A key is locked when its file has no owner write bit (`test -w` is always true for root).
locked() { [ -z "$(find "$dir/$1" -maxdepth 0 -perm -u+w)" ]; }

describe() { # KEY: the entry's JSON
  size=$(wc -c < "$dir/$1")
  state=; locked "$1" && state=" · locked"
  jq -cn --arg k "$1" --argjson n "$size" --arg s "$state" \
    '{description:("key \($k) · \($n) bytes\($s)"), ref:("kv://\($k)"), kind:"key"}'
}

# The conditions for changing KEY ("" for a new key at the root).
conditions() {
  ro=true; [ "${KV_READONLY:-0}" = 1 ] && ro=false
  unlocked=true; [ -n "$1" ] && [ -e "$dir/$1" ] && locked "$1" && unlocked=false
  jq -cn --argjson ro "$ro" --argjson un "$unlocked" --arg k "$1" '[
    {name:"writable_store", ok:$ro, policy:true,
     detail:(if $ro then "the store takes changes" else "KV_READONLY=1: this store takes no changes" end)},
    {name:"not_locked", ok:$un,
     detail:(if $un then "the key is not locked" else "kv/\($k) is read-only (chmod u+w its file to unlock it)" end)}]'
}

# guarded ID KEY: answer `blocked` and return 1 when a condition fails.
guarded() {
  c=$(conditions "$2")
  if [ "$(printf '%s' "$c" | jq 'all(.ok)')" != true ]; then
    first=$(printf '%s' "$c" | jq -r 'map(select(.ok|not))[0] | "blocked by guard \(.name): \(.detail)"')
    fail "$1" -32001 "$first" "{\"conditions\":$c}"
    return 1
  fi
}

store_ops='[{"name":"set","description":"set(key, value): create or replace a key.",
  "schema":{"type":"object","properties":{"key":{"type":"string"},"value":{"type":"string"}},
            "required":["key","value"],"additionalProperties":false}}]'
store_ops=$(printf '%s' "$store_ops" | jq -c .) # one message is one line
# Every key has the same ops: declared once, so the runtime never asks `ops` for a key.
kind_ops='{
  "key":[{"name":"set_value","description":"set_value(value): replace this key'"'"'s value (writing body does it).",
          "schema":{"type":"object","properties":{"value":{"type":"string"}},"required":["value"],"additionalProperties":false}},
         {"name":"delete","description":"delete(): remove this key.",
          "schema":{"type":"object","properties":{},"additionalProperties":false}}]}'

while IFS= read -r line; do
  [ -n "$line" ] || continue
  # One jq run gives the id, the method and the path's one segment (or none).
  head=$(printf '%s' "$line" | jq -r '[(.id // "null" | tostring), .method,
           (.params.path // [] | length | tostring), (.params.path[0] // "")] | join("\t")') || {
    echo "kv.sh: a line that is not JSON: $line" >&2; exit 1; }
  IFS='	' read -r id method depth key <<EOF
$head
EOF
  [ "$id" = null ] && continue # a notification: none is defined for hosts to receive
  if [ "$depth" -gt 1 ] || { [ "$depth" = 1 ] && ! valid_key "$key"; }; then
    key=/ # no such entry
  fi
  case $method in
    initialize)
      reply "$id" "$(jq -cn --argjson kinds "$kind_ops" '{protocol:"wip-host-protocol",version:1,name:"kv",
        description:"a key-value store in a directory; set(key, value) adds a key",
        capabilities:{body:true,changes:false,cache_ttl_ms:1000,kinds:$kinds}}')" ;;
    entry)
      if [ "$depth" = 0 ]; then
        # The root is always there: null lets initialize's name and description say it.
        reply "$id" null
      elif [ -f "$dir/$key" ]; then
        reply "$id" "$(describe "$key")"
      else
        reply "$id" null
      fi ;;
    children)
      if [ "$depth" != 0 ]; then
        [ -f "$dir/$key" ] && reply "$id" '{"children":[]}' || fail "$id" -32003 "no key $key"
        continue
      fi
      out='[]'
      for f in "$dir"/*; do
        [ -f "$f" ] || continue
        k=${f##*/}
        valid_key "$k" || continue
        out=$(printf '%s' "$out" | jq -c --arg k "$k" --argjson e "$(describe "$k")" '. + [$e + {name:$k}]')
      done
      reply "$id" "{\"children\":$out}" ;;
    ops)
      # Asked only for entries without a declared kind: the root.
      if [ "$depth" = 0 ]; then reply "$id" "$store_ops"; else fail "$id" -32003 "no such entry"; fi ;;
    guard)
      if [ "$depth" = 1 ] && [ ! -f "$dir/$key" ]; then fail "$id" -32003 "no key $key"; continue; fi
      [ "$depth" = 0 ] && key=
      reply "$id" "{\"conditions\":$(conditions "$key")}" ;;
    body)
      if [ "$depth" = 0 ]; then reply "$id" null; continue; fi
      [ -f "$dir/$key" ] || { reply "$id" null; continue; }
      mtime=$(stat -c %Y "$dir/$key")
      if iconv -f UTF-8 -t UTF-8 < "$dir/$key" > /dev/null 2>&1; then
        # Writable only when changing it is allowed now.
        w=null
        [ "$(conditions "$key" | jq 'all(.ok)')" = true ] && w='{"op":"set_value","arg":"value"}'
        reply "$id" "$(jq -cn --rawfile t "$dir/$key" --argjson m "$mtime" --argjson w "$w" \
          '{text:$t, modified:$m} + (if $w == null then {} else {write:$w} end)')"
      else
        reply "$id" "$(jq -cn --arg b "$(base64 -w0 < "$dir/$key")" --argjson m "$mtime" '{base64:$b, modified:$m}')"
      fi ;;
    call)
      op=$(printf '%s' "$line" | jq -r '.params.op')
      case $depth:$op in
        0:set)
          key=$(printf '%s' "$line" | jq -r '.params.args.key')
          valid_key "$key" || { fail "$id" -32602 "key $key: use letters, digits, dot, dash and underscore"; continue; }
          guarded "$id" "$key" || continue
          new=true; [ -e "$dir/$key" ] && new=false
          printf '%s' "$line" | jq -j '.params.args.value' > "$dir/.$key.new" && mv "$dir/.$key.new" "$dir/$key"
          if [ "$new" = true ]; then
            reply "$id" "$(jq -cn --arg k "$key" '{result:"created key \($k)\n",discovered:[[$k]],changed:[[]]}')"
          else
            reply "$id" "$(jq -cn --arg k "$key" '{result:"replaced key \($k)\n",changed:[[$k]]}')"
          fi ;;
        1:set_value)
          [ -f "$dir/$key" ] || { fail "$id" -32003 "no key $key"; continue; }
          guarded "$id" "$key" || continue
          printf '%s' "$line" | jq -j '.params.args.value' > "$dir/.$key.new" && mv "$dir/.$key.new" "$dir/$key"
          reply "$id" "$(jq -cn --arg k "$key" '{result:"replaced key \($k)\n",changed:[[$k]]}')" ;;
        1:delete)
          [ -f "$dir/$key" ] || { fail "$id" -32003 "no key $key"; continue; }
          guarded "$id" "$key" || continue
          rm -f "$dir/$key"
          # A deleted entry is reported in changed: the runtime finds it gone.
          reply "$id" "$(jq -cn --arg k "$key" '{result:"deleted key \($k)\n",changed:[[$k]]}')" ;;
        *) fail "$id" -32003 "no op $op here" ;;
      esac ;;
    *) fail "$id" -32601 "kv.sh does not implement $method" ;;
  esac
done
