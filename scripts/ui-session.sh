#!/usr/bin/env bash
# A scripted session of the desktop app under a real X server (issue 24): Xvfb, the openbox window
# manager, keys and clicks sent with xdotool, a screenshot after each step. It drives the main flows a
# new user meets: first start, three questions in one chat, a 20 KB paste and another question, switching
# the model and back (the model picker), editing an earlier message and flipping between its versions,
# and a restart. It needs no GPU: the app runs on the model that ships with it (the Pocket Dictionary).
#
#   scripts/ui-session.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR defaults to build (the app is BUILD_DIR/app/tandem); OUT_DIR to a new folder under /tmp. It
# prints the folder of the screenshots (NN-step.png) and leaves the session's settings and conversations
# there too (home/), never touching the user's own. Needs Xvfb, openbox and xdotool (apt-get install xvfb
# openbox xdotool; x11-apps for xwd) and python3 with tkinter (python3-tk, for the clipboard). Clicks are at fixed places of a 1440x900 screen with
# the window maximised; the screenshots show whether they landed.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${1:-build}
OUT=${2:-$(mktemp -d /tmp/tandem-ui-session.XXXXXX)}
APP="$BUILD/app/tandem"
[[ -x "$APP" ]] || { echo "no $APP: build it first (scripts/build.sh)" >&2; exit 1; }
for tool in Xvfb openbox xdotool xwd python3; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install xvfb openbox xdotool x11-apps)" >&2; exit 1; }
done
mkdir -p "$OUT/home/config" "$OUT/home/data"
export XDG_CONFIG_HOME="$OUT/home/config" XDG_DATA_HOME="$OUT/home/data"
export QT_QPA_PLATFORM=xcb

# A free display number.
DISPLAY_NUMBER=77
while [[ -e /tmp/.X11-unix/X$DISPLAY_NUMBER || -e /tmp/.X$DISPLAY_NUMBER-lock ]]; do DISPLAY_NUMBER=$((DISPLAY_NUMBER + 1)); done
export DISPLAY=:$DISPLAY_NUMBER

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

Xvfb "$DISPLAY" -screen 0 1440x900x24 -nolisten tcp >"$OUT/xvfb.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done
openbox >"$OUT/openbox.log" 2>&1 &
PIDS+=($!)
sleep 1

# A screenshot: the screen (xwd -root), with the app's windows captured one by one and laid over it,
# oldest first (Xvfb's root capture shows dialogs and popups such as the model picker's list black); XWD
# to PNG with the standard library alone.
shot() {
    local name=$1 overlays=()
    xwd -root -silent >"$OUT/$name.xwd"
    for id in $(xdotool search --onlyvisible --class tandem 2>/dev/null | sort -n); do
        local info x y
        info=$(xwininfo -id "$id" 2>/dev/null) || continue
        x=$(sed -n 's/^ *Absolute upper-left X: *//p' <<<"$info")
        y=$(sed -n 's/^ *Absolute upper-left Y: *//p' <<<"$info")
        xwd -id "$id" -silent >"$OUT/$name.$id.xwd" 2>/dev/null || continue
        overlays+=("$OUT/$name.$id.xwd:$x:$y")
    done
    python3 - "$OUT/$name.xwd" "$OUT/$name.png" "${overlays[@]}" <<'PY'
import struct, sys, zlib

def read(path):
    data = open(path, 'rb').read()
    h = struct.unpack('>25I', data[:100])
    header_size, width, height, bpp, bytes_per_line, ncolors, byte_order = h[0], h[4], h[5], h[11], h[12], h[19], h[7]
    if bpp not in (24, 32): sys.exit(f'{path}: {bpp} bits per pixel, only 24 and 32 are handled')
    pixels, step, rows = data[header_size + 12 * ncolors:], bpp // 8, []
    for y in range(height):
        line = pixels[y * bytes_per_line:y * bytes_per_line + step * width]
        rgb = bytearray(3 * width)
        o = 0 if byte_order == 0 else step - 3   # B G R (X) or (X) R G B
        if byte_order == 0:
            rgb[0::3], rgb[1::3], rgb[2::3] = line[2::step], line[1::step], line[0::step]
        else:
            rgb[0::3], rgb[1::3], rgb[2::3] = line[o::step], line[o + 1::step], line[o + 2::step]
        rows.append(rgb)
    return width, height, rows

width, height, rows = read(sys.argv[1])
for overlay in sys.argv[3:]:
    path, x, y = overlay.rsplit(':', 2)
    w, h, over = read(path)
    x, y = int(x), int(y)
    for dy in range(h):
        if 0 <= y + dy < height:
            left, right = max(0, x), min(width, x + w)
            if left < right:
                rows[y + dy][3 * left:3 * right] = over[dy][3 * (left - x):3 * (right - x)]
def chunk(kind, body):
    return struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body) & 0xffffffff)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0))
png += chunk(b'IDAT', zlib.compress(b''.join(b'\0' + bytes(r) for r in rows), 6)) + chunk(b'IEND', b'')
open(sys.argv[2], 'wb').write(png)
PY
    rm -f "$OUT/$name".*xwd
    echo "  $OUT/$name.png"
}

start_app() {
    "$APP" >>"$OUT/tandem.log" 2>&1 &
    APP_PID=$!
    PIDS+=($APP_PID)
    WINDOW=$(xdotool search --sync --onlyvisible --name 'Tandem' | head -1)
    xdotool windowactivate --sync "$WINDOW" 2>/dev/null || true
    sleep 2  # the model loads (the Pocket Dictionary: well under a second)
}

# Types `text` into the message box (which has the focus) and sends it; waits for the answer.
ask() {
    xdotool type --delay 15 -- "$1"
    xdotool key Return
    sleep "${2:-4}"
}

click() { xdotool mousemove --sync "$1" "$2" click 1; sleep 0.6; }

echo "Screenshots:"
# 1. First start: a fresh settings folder and database; the window as a new user sees it.
start_app
shot 01-first-start
# Maximised (openbox), so the places clicked below are the same on every run.
xdotool key super+Up 2>/dev/null || true
xdotool windowsize --sync "$WINDOW" 1440 860 2>/dev/null || true
xdotool windowmove --sync "$WINDOW" 0 0 2>/dev/null || true
sleep 1
shot 02-window-placed

# 2. Three questions in one chat.
ask "What does ubiquitous mean?"
ask "What does river mean?"
ask "And serendipity?"
shot 03-three-questions

# 3. A 20 KB paste, then another question. The clipboard is held by a hidden Tk window (python3-tk) for
#    the moment of the paste: typed key by key, 20 KB would take minutes and is not what a user does.
python3 - "$OUT/paste.txt" <<'PY' &
import sys, tkinter
text = ('All the experts, one by one. ' * 700)[:20000]
open(sys.argv[1], 'w').write(text)
root = tkinter.Tk()
root.withdraw()
root.clipboard_clear()
root.clipboard_append(text)
root.update()
root.after(15000, root.destroy)
root.mainloop()
PY
CLIPBOARD_PID=$!
sleep 2
xdotool key ctrl+v
sleep 2
shot 04-paste-typed
xdotool key Return
sleep 6
shot 05-paste-sent
ask "What does harbour mean?"
shot 06-after-the-paste

# 4. Switch the model and back, through the picker (Ctrl+Shift+M opens it): a copy of the shipped model
#    in the models folder is the second model.
SHIPPED=$(ls -d "$BUILD"/share/tandem/models/* | head -1)
mkdir -p "$XDG_DATA_HOME/tandem/models"
cp -r "$SHIPPED" "$XDG_DATA_HOME/tandem/models/pocket-dictionary-copy"
xdotool key ctrl+shift+m
sleep 1
shot 07-picker-open
xdotool key Down Return
sleep 3
shot 08-switched
ask "What does lantern mean?"
shot 09-asked-the-other-model
xdotool key ctrl+shift+m
sleep 1
xdotool key Up Return
sleep 3
shot 10-switched-back

wait "$CLIPBOARD_PID" 2>/dev/null || true

# 5. Edit an earlier message and flip between its versions: the first question, at the top of the chat
#    (the mouse wheel scrolls there), its Edit button, new text, Send; then ‹ and ›.
xdotool mousemove --sync 800 400 click --repeat 60 --delay 20 4
sleep 1
shot 11-top-of-the-chat
EDIT_X=${EDIT_X:-1056} EDIT_Y=${EDIT_Y:-149}
if [[ $EDIT_X -gt 0 ]]; then
    click "$EDIT_X" "$EDIT_Y"
    xdotool key ctrl+a
    xdotool type --delay 15 -- "What does ubiquity mean?"
    click "${SEND_X:-1084}" "${SEND_Y:-374}"  # the editor's Send (Enter adds a line there)
    sleep 4
    shot 12-edited
    PREV_X=${PREV_X:-913} PREV_Y=${PREV_Y:-149} NEXT_X=${NEXT_X:-953} NEXT_Y=${NEXT_Y:-149}
    if [[ $PREV_X -gt 0 ]]; then
        click "$PREV_X" "$PREV_Y"
        shot 13-previous-version
        # The other version's messages follow at the bottom: back to the top for its ›.
        xdotool mousemove --sync 800 400 click --repeat 60 --delay 20 4
        sleep 1
        click "$NEXT_X" "$NEXT_Y"
        shot 14-next-version
    fi
fi

# 6. Restart: quit with Ctrl+Q and start again; the chat, the model and the window come back.
xdotool key ctrl+q
wait "$APP_PID" 2>/dev/null || true
start_app
shot 15-after-restart
xdotool key ctrl+q
wait "$APP_PID" 2>/dev/null || true
echo "Session folder: $OUT"
