#!/usr/bin/env bash
# A file manager's view of a world with titled names: mounts the default world with
# --titled, opens tracker/issues in pcmanfm (detailed list view) on a virtual X server
# (Xvfb), and saves a screenshot as a PNG.
#
#   scripts/pcmanfm-screenshot.sh [OUT.png]      (default: target/people/pcmanfm-titled.png)
#
# Needs Xvfb, pcmanfm, xwd, xdotool and netpbm (xwdtopnm, pnmtopng). As root on Debian it
# installs what is missing: apt-get install xvfb pcmanfm x11-apps xdotool netpbm.
# It checks that pcmanfm's window shows the folder and that the titled names are what the
# mount lists; whether they are readable in the picture is for a person to look at.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/people/pcmanfm-titled.png}
mkdir -p "$(dirname "$out")"

need=()
for tool in Xvfb:xvfb pcmanfm:pcmanfm xwd:x11-apps xdotool:xdotool xwdtopnm:netpbm pnmtopng:netpbm; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if ((${#need[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "missing: ${need[*]} (sudo apt-get install ${need[*]})" >&2
    exit 1
  fi
fi

cargo build --quiet --bin wip
wip=$PWD/target/debug/wip
work=$(mktemp -d /tmp/wip-shot.XXXXXX)
mnt=$work/world
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -- "$p" 2>/dev/null || true; done
  "$wip" umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

"$wip" mount "$mnt" --state "$work/state" --titled >/dev/null
issues=$mnt/tracker/issues

# pcmanfm's own settings in a home of its own: detailed list, a large window.
export HOME=$work/home XDG_CONFIG_HOME=$work/home/.config XDG_CACHE_HOME=$work/home/.cache
mkdir -p "$XDG_CONFIG_HOME/pcmanfm/default" "$XDG_CONFIG_HOME/libfm"
cat > "$XDG_CONFIG_HOME/pcmanfm/default/pcmanfm.conf" <<EOF
[ui]
win_width=1400
win_height=860
view_mode=list
show_hidden=0
sort=name;ascending;
show_statusbar=1
EOF
cat > "$XDG_CONFIG_HOME/libfm/libfm.conf" <<EOF
[config]
single_click=0
[ui]
big_icon_size=48
small_icon_size=16
EOF

# A free display number.
display=99
while [ -e "/tmp/.X11-unix/X$display" ] || [ -e "/tmp/.X$display-lock" ]; do display=$((display + 1)); done
Xvfb ":$display" -screen 0 1440x900x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
pids+=($!)
export DISPLAY=":$display"
for _ in $(seq 100); do [ -e "/tmp/.X11-unix/X$display" ] && break; sleep 0.1; done

# Local files only: no gvfs daemons (they would mount a FUSE file system of their own in
# the throw-away home and outlive the script). pcmanfm runs in a process group of its own,
# ended with the script.
export GIO_USE_VFS=local GIO_USE_VOLUME_MONITOR=unix
setsid pcmanfm --no-desktop "$issues" >"$work/pcmanfm.log" 2>&1 &
pids+=(-$!)

# Wait for the window (named after the folder), then for the listing to settle.
win=
for _ in $(seq 150); do
  win=$(xdotool search --onlyvisible --name "issues" 2>/dev/null | head -1 || true)
  [ -n "$win" ] && break
  sleep 0.2
done
if [ -z "$win" ]; then
  echo "pcmanfm opened no window for $issues; its log:" >&2
  cat "$work/pcmanfm.log" >&2
  exit 1
fi
xdotool windowmove "$win" 0 0 windowsize "$win" 1440 900 2>/dev/null || true
sleep 3

xwd -root -silent | xwdtopnm 2>/dev/null | pnmtopng > "$out"
titled=$(find "$issues" -mindepth 1 -maxdepth 1 -name '[0-9]* *' | wc -l)
echo "saved $out ($(stat -c %s "$out") bytes): pcmanfm showing $issues, $titled titled names, e.g."
ls "$issues" | grep '^[0-9]' | head -3 | sed 's/^/  /'
