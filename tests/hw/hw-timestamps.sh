#!/bin/sh
# Verifies `ibprobe --hw-timestamps` on real hardware: a device whose
# completion_timestamp_mask is non-zero (NVIDIA/Mellanox ConnectX-4 and
# later with mlx5). NOT run by CI: this project has no such device (rxe
# reports mask 0 and is refused), so the hardware path is unverified until
# someone runs this and reports the output.
#
# Usage (as a user allowed to use the device; root is not needed):
#   tests/hw/hw-timestamps.sh [DEV] [PEER]
#     DEV   the device (default: the first with completion_timestamps true)
#     PEER  a host running `ibprobe server --dev ITS_DEV` (optional; with it
#           the round-trip split is checked too)
#   IBPROBE=path/to/ibprobe  (default: ibprobe in PATH)
#   COUNT=N messages per run (default 20000)
#
# What it runs and checks:
# 1. `ibprobe devices --json`: DEV has completion_timestamps true and a
#    non-zero hca_core_clock_khz.
# 2. `ibprobe loopback --transport ud --hw-timestamps`: the report has
#    `hca_one_way` and `prober_delay`; at least 99% of the messages are
#    split (the rest are named in warnings "hw timestamps: ..."); the HCA's
#    one-way part is below the one-way latency's median; the note shows the
#    HCA clock measured within +-200 ppm of hca_core_clock.
# 3. With PEER: `ibprobe client PEER --transport rc --hw-timestamps`: the
#    report has `network_rtt`, `prober_delay` and `responder_delay`; at
#    least 99% split; mean(network) + mean(prober) + mean(responder) is
#    within 2% of the mean RTT (the three parts add up to each round trip).
#
# Expected output: one "ok:" line per check and "PASS" at the end (exit
# 0); "FAIL: ..." and exit 1 on the first check that does not hold; exit 2
# when no device stamps completions (nothing to verify). Send the whole
# output, with `ibprobe --version` and the device (ibv_devinfo -v | grep -i
# -e hca_core_clock -e timestamp), to the maintainers.
set -eu

IBPROBE=${IBPROBE:-ibprobe}
COUNT=${COUNT:-20000}
DEV=${1:-}
PEER=${2:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

"$IBPROBE" devices --json > "$TMP/devices.json" || fail "ibprobe devices --json"
DEV=$(python3 - "$TMP/devices.json" "$DEV" <<'EOF'
import json, sys
devs = json.load(open(sys.argv[1]))
devs = devs.get("devices", devs) if isinstance(devs, dict) else devs
want = sys.argv[2]
for d in devs:
    c = d.get("caps", {})
    if (not want or d["name"] == want) and c.get("completion_timestamps") and c.get("hca_core_clock_khz", 0) > 0:
        print(d["name"]); break
EOF
)
if [ -z "$DEV" ]; then
    echo "no device with completion timestamps${1:+ named $1} (ibprobe devices --json: caps.completion_timestamps); nothing to verify"
    exit 2
fi
echo "ok: $DEV stamps completions"

check() { # $1 report.json, $2 one_way|round_trip
python3 - "$1" "$2" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
mode = sys.argv[2]
d = {x["name"]: x for x in r["distributions"]}
def fail(m):
    print("FAIL: " + m); sys.exit(1)
parts = ["hca_one_way", "prober_delay"] if mode == "one_way" else ["network_rtt", "prober_delay", "responder_delay"]
for p in parts:
    if p not in d:
        fail(f"no {p} distribution in the report")
base = d["one_way" if mode == "one_way" else "rtt"]
n = d[parts[0]]["count"]
if n < 0.99 * base["count"]:
    fail(f"only {n} of {base['count']} messages split: {[w for w in r['warnings'] if 'hw timestamps' in str(w)]}")
print(f"ok: {n} of {base['count']} messages split")
if mode == "one_way":
    if d["hca_one_way"]["p50_ns"] >= base["p50_ns"]:
        fail(f"HCA one-way p50 {d['hca_one_way']['p50_ns']} ns is not below the one-way p50 {base['p50_ns']} ns")
    print(f"ok: HCA one-way p50 {d['hca_one_way']['p50_ns']} ns < one-way p50 {base['p50_ns']} ns")
else:
    total = sum(d[p]["mean_ns"] for p in parts)
    if abs(total - base["mean_ns"]) > 0.02 * base["mean_ns"]:
        fail(f"network + prober + responder means = {total:.0f} ns, RTT mean {base['mean_ns']:.0f} ns (more than 2% apart)")
    print(f"ok: parts add up: {total:.0f} ns vs RTT mean {base['mean_ns']:.0f} ns")
notes = " ".join(map(str, r.get("notes", [])))
m = re.search(r"([+-][0-9.]+) ppm measured", notes)
if not m:
    fail(f"the HCA clock rate was not measured: {notes}")
if abs(float(m.group(1))) > 200:
    fail(f"HCA clock {m.group(1)} ppm off hca_core_clock")
print(f"ok: HCA clock {m.group(1)} ppm off hca_core_clock")
EOF
}

"$IBPROBE" loopback --transport ud --dev "$DEV" --hw-timestamps --count "$COUNT" --json \
    > "$TMP/loopback.json" || fail "ibprobe loopback --hw-timestamps exited $?"
check "$TMP/loopback.json" one_way

if [ -n "$PEER" ]; then
    "$IBPROBE" client "$PEER" --transport rc --dev "$DEV" --hw-timestamps --count "$COUNT" --json \
        > "$TMP/client.json" || fail "ibprobe client --hw-timestamps exited $?"
    check "$TMP/client.json" round_trip
fi
echo PASS
